"""The explorer's index: chain events and IPFS objects in one embedded SQLite file.

Every event is one row keyed by (transaction hash, log index), written with an upsert, so a batch
delivered twice (an RPC outage mid-poll, a restart before the cursor was saved) never makes a
second row. The event cursors' state is saved in the same transaction as the rows it covers.
Everything the API shows (a work's status, a pool's workers, the learning curve) is derived from
these rows by queries, so a reorg only has to delete or move rows and the derived views follow.

IPFS objects (run specs, manifests, metrics, evidence) are content-addressed and never change,
so they are cached by digest and outlive reorgs.

SQLite serves one explorer well (one writer, many readers, WAL mode). A larger deployment would
put the same two tables in a server database (e.g. PostgreSQL: `events` with the same primary key
and `ON CONFLICT` upserts); the queries below are plain SQL plus SQLite's JSON functions, and the triggers add up
uint256 amounts with `dec_add`, a function this module registers on each connection (PostgreSQL's `numeric` would
add them natively).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import JsonValue

SCHEMA_VERSION = 5
"""`PRAGMA user_version` of the index (3: `claimed_works` a table the store keeps, no longer a view; 4: a work's
status and case state kept in `works`, and counts in `work_counts` and `event_counts`, by triggers as rows are written,
so no page or /metrics scans the history; 5: a work's time, samples and first verdict times in `works`, latency
histograms, sample and amount sums, slashes by pool and the pools each claim paid, and a court validator's verdicts by
outcome, so no pool, court, validator or trainer page adds up the history either). An index of another version is rebuilt from the chain on open (its event rows and
cursors are dropped; the IPFS cache, which never changes, is kept)."""

DERIVED = ("claimed_works", "work_status", "court_cases", "works", "work_counts", "event_counts", "latencies",
           "slash_sums", "claim_pools", "verdict_blocks", "judge_counts")
"""What the index derives from its event rows (dropped with them when the schema changes)."""

WORK_STATUS = """CASE
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'WorkChallenged') THEN 'rejected'
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'WorkExpired') THEN 'expired'
        WHEN EXISTS (SELECT 1 FROM claimed_works c WHERE c.work_id = {w}) THEN 'paid'
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'WorkAccepted') THEN 'accepted'
        ELSE 'pending' END"""
"""A work's status from the index's rows ({w}: the work id)."""

CASE_STATE = """CASE
        WHEN NOT EXISTS (SELECT 1 FROM events c WHERE c.name = 'CourtConfigured' AND c.pool_id = {pool}) THEN NULL
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'CaseVoided') THEN 'void'
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'VerdictFinal') THEN 'final'
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'Disputed') THEN 'disputed'
        WHEN EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name = 'VerdictGiven') THEN 'verdict'
        ELSE 'pending' END"""
"""A work's court case state ({w}: the work id, {pool}: its pool; NULL outside pools the ValidatorCourt judges)."""


FIRST_AT = """(SELECT MIN(v.block_time) FROM events v WHERE v.work_id = {w} AND v.name IN ({names})
                AND v.pool_id = {pool})"""
"""When the first event of `names` of work {w} in its pool {pool} was mined (NULL before one is)."""


FIRST_VERDICT = """(SELECT {what} FROM events v WHERE v.work_id = {w} AND v.name = 'VerdictGiven' AND v.pool_id = {pool}
                     ORDER BY v.block_number, v.log_index LIMIT 1)"""
"""What the first verdict (VerdictGiven) of work {w} in its pool {pool} says ({what}: an expression of its row v)."""

HAS = "EXISTS (SELECT 1 FROM events v WHERE v.work_id = {w} AND v.name IN ({names}){also})"
"""Whether work {w} has an event of `names` ({also}: a further condition on it, or nothing)."""


def _refresh_work(w: str) -> str:
    """Statements (for a trigger) that make `works`' row of work `w` what its events say: gone without a
    submission, else the submission's place with its status and case state."""
    return f"""
    DELETE FROM works WHERE work_id = {w}
      AND NOT EXISTS (SELECT 1 FROM events s WHERE s.work_id = {w} AND s.name = 'WorkSubmitted');
    INSERT INTO works (work_id, pool_id, worker, block_number, log_index, tx_hash, block_time, n_samples, given_at,
                       decided_at, status, state, judge, accepted, ended, disputed, resolved)
      SELECT s.work_id, s.pool_id, s.worker, s.block_number, s.log_index, s.tx_hash, s.block_time,
             json_extract(s.data, '$.n_samples'), {FIRST_AT.format(w='s.work_id', pool='s.pool_id', names="'VerdictGiven'")},
             {FIRST_AT.format(w='s.work_id', pool='s.pool_id', names="'WorkAccepted', 'WorkChallenged'")},
             {WORK_STATUS.format(w='s.work_id')}, {CASE_STATE.format(w='s.work_id', pool='s.pool_id')},
             {FIRST_VERDICT.format(what='v.party', w='s.work_id', pool='s.pool_id')},
             {FIRST_VERDICT.format(what="json_extract(v.data, '$.accepted')", w='s.work_id', pool='s.pool_id')},
             {HAS.format(w='s.work_id', names="'VerdictFinal', 'CaseVoided'", also='')},
             {HAS.format(w='s.work_id', names="'Disputed'", also=' AND v.pool_id = s.pool_id')},
             {HAS.format(w='s.work_id', names="'DisputeResolved'", also='')}
      FROM events s WHERE s.work_id = {w} AND s.name = 'WorkSubmitted'
      ON CONFLICT (work_id) DO UPDATE SET pool_id = excluded.pool_id, worker = excluded.worker,
        block_number = excluded.block_number, log_index = excluded.log_index, tx_hash = excluded.tx_hash,
        block_time = excluded.block_time, n_samples = excluded.n_samples, given_at = excluded.given_at,
        decided_at = excluded.decided_at, status = excluded.status, state = excluded.state, judge = excluded.judge,
        accepted = excluded.accepted, ended = excluded.ended, disputed = excluded.disputed,
        resolved = excluded.resolved;"""


def _count_work(row: str, delta: int) -> str:
    latencies = "".join(f"""
    INSERT INTO latencies (pool_id, kind, seconds, n)
      SELECT {row}.pool_id, '{kind}', {row}.{kind}_at - {row}.block_time, {delta} WHERE {row}.{kind}_at IS NOT NULL
      ON CONFLICT (pool_id, kind, seconds) DO UPDATE SET n = n + ({delta});""" for kind in ("given", "decided"))
    return f"""INSERT INTO work_counts (pool_id, worker, status, state, n, samples)
      VALUES ({row}.pool_id, {row}.worker, {row}.status, coalesce({row}.state, ''), {delta},
              {delta} * coalesce({row}.n_samples, 0))
      ON CONFLICT (pool_id, worker, status, state) DO UPDATE SET n = n + ({delta}), samples = samples + excluded.samples;
    {latencies}
    INSERT INTO claim_pools (tx_hash, pool_id, n)
      SELECT c.tx_hash, {row}.pool_id, {delta} FROM claimed_works c WHERE c.work_id = {row}.work_id
      ON CONFLICT (tx_hash, pool_id) DO UPDATE SET n = n + ({delta});
    INSERT INTO judge_counts (pool_id, judge, accepted, ended, disputed, resolved, n)
      SELECT {row}.pool_id, {row}.judge, coalesce({row}.accepted, 0), {row}.ended, {row}.disputed, {row}.resolved, {delta}
      WHERE {row}.judge IS NOT NULL
      ON CONFLICT (pool_id, judge, accepted, ended, disputed, resolved) DO UPDATE SET n = n + ({delta});"""


AMOUNT = """coalesce(CASE {row}.name WHEN 'VerdictFinal' THEN json_extract({row}.data, '$.fee')
      WHEN 'FeesFunded' THEN json_extract({row}.data, '$.amount') WHEN 'BondAdded' THEN json_extract({row}.data, '$.amount')
      END, '0')"""
"""The money an event moves that `event_counts` adds up (a decimal string; '0' for events it does not add up)."""


def _count_event(row: str, delta: int) -> str:
    amount = AMOUNT.format(row=row) if delta > 0 else f"'-' || {AMOUNT.format(row=row)}"
    return f"""INSERT INTO event_counts (name, pool_id, party, n, amount)
      VALUES ({row}.name, coalesce({row}.pool_id, -1), coalesce({row}.party, ''), {delta}, {amount})
      ON CONFLICT (name, pool_id, party) DO UPDATE SET n = n + ({delta}),
        amount = CASE WHEN excluded.amount IN ('0', '-0') THEN amount ELSE dec_add(amount, excluded.amount) END;"""


def _count_verdict(row: str, delta: int) -> str:
    return f"""INSERT INTO verdict_blocks (pool_id, name, block_number, n)
      SELECT {row}.pool_id, {row}.name, {row}.block_number, {delta}
      WHERE {row}.name IN ('WorkAccepted', 'WorkChallenged') AND {row}.pool_id IS NOT NULL
      ON CONFLICT (pool_id, name, block_number) DO UPDATE SET n = n + ({delta});"""


def _pair_slashes(row: str, delta: int) -> str:
    """Statements that add (`delta` 1) or take away (-1) the slashes a `Slashed` or `WorkChallenged` row pairs with:
    a worker's slash is its pool's when a challenge in that pool was recorded in the same transaction (the
    StakeManager knows no pools), one pair per (slash, challenge) as a join of the two would count them."""
    sign = "" if delta > 0 else "'-' || "
    upsert = f"""ON CONFLICT (pool_id, worker, slasher) DO UPDATE SET n = n + ({delta}),
        amount = dec_add(amount, excluded.amount);"""
    return f"""
    INSERT INTO slash_sums (pool_id, worker, slasher, n, amount)
      SELECT c.pool_id, coalesce({row}.worker, ''), coalesce(lower(json_extract({row}.data, '$.slasher')), ''), {delta},
             {sign}coalesce(json_extract({row}.data, '$.amount'), '0')
      FROM events c WHERE {row}.name = 'Slashed' AND c.tx_hash = {row}.tx_hash AND c.name = 'WorkChallenged'
        AND c.pool_id IS NOT NULL
      {upsert}
    INSERT INTO slash_sums (pool_id, worker, slasher, n, amount)
      SELECT {row}.pool_id, coalesce(s.worker, ''), coalesce(lower(json_extract(s.data, '$.slasher')), ''), {delta},
             {sign}coalesce(json_extract(s.data, '$.amount'), '0')
      FROM events s WHERE {row}.name = 'WorkChallenged' AND {row}.pool_id IS NOT NULL AND s.tx_hash = {row}.tx_hash
        AND s.name = 'Slashed'
      {upsert}"""


def _claim_pool(claim: str, delta: int) -> str:
    return f"""INSERT INTO claim_pools (tx_hash, pool_id, n)
      SELECT {claim}.tx_hash, w.pool_id, {delta} FROM works w WHERE w.work_id = {claim}.work_id
      ON CONFLICT (tx_hash, pool_id) DO UPDATE SET n = n + ({delta});"""


def dec_add(a: str, b: str) -> str:
    """`a + b` of two decimal strings (uint256 amounts: SQLite's integers stop at 2**63)."""
    return str(int(a) + int(b))


SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    tx_hash      TEXT NOT NULL,
    log_index    INTEGER NOT NULL,
    contract     TEXT NOT NULL,      -- 'ComputePool', 'StakeManager' or 'ValidatorCourt'
    ordinal      INTEGER NOT NULL,   -- position among this contract's logs in the transaction (the cursor's key)
    name         TEXT NOT NULL,
    block_number INTEGER NOT NULL,
    block_hash   TEXT NOT NULL,
    block_time   INTEGER NOT NULL,   -- the block's timestamp (the clock the contracts use)
    pool_id      INTEGER,            -- court events that name only a work: the work's pool (link_court_rows)
    work_id      TEXT,               -- a court credit or withdrawal: the work its transaction decided
    worker       TEXT,
    party        TEXT,               -- the validator (judge, disputer, voter, penalised party, credited) it is about
    data         TEXT NOT NULL,      -- the event's fields as JSON (amounts as decimal strings)
    PRIMARY KEY (tx_hash, log_index)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_cursor_key ON events (contract, tx_hash, ordinal);
-- (pool|name|work|worker|party, name) in chain order: a page of one kind of event, newest first, reads only that page
CREATE INDEX IF NOT EXISTS events_by_pool ON events (pool_id, name, block_number, log_index);
CREATE INDEX IF NOT EXISTS events_by_name ON events (name, block_number, log_index);
CREATE INDEX IF NOT EXISTS events_by_work ON events (work_id, name, block_number, log_index);
CREATE INDEX IF NOT EXISTS events_by_worker ON events (worker, name, block_number, log_index);
CREATE INDEX IF NOT EXISTS events_by_party ON events (party, name, block_number, log_index);
-- a transaction's events by contract and name, with their log index (a credit's kind is read from this index alone)
CREATE INDEX IF NOT EXISTS events_by_tx ON events (tx_hash, contract, name, log_index);
CREATE INDEX IF NOT EXISTS events_by_block ON events (block_number);
CREATE TABLE IF NOT EXISTS objects (
    digest      TEXT PRIMARY KEY,    -- 0x sha256 of the raw IPFS block
    kind        TEXT NOT NULL,       -- runspec | manifest | metrics | evidence
    body        TEXT,                -- JSON, NULL until fetched
    error       TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    retry_after REAL NOT NULL DEFAULT 0
);
-- the works each RewardsClaimed paid (its work_ids), written with the claim's row (Store.upsert_event, remove_event):
-- a view over json_each of every claim made "paid" a scan of all claims for each work, quadratic in the history
CREATE TABLE IF NOT EXISTS claimed_works (
    work_id TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    PRIMARY KEY (work_id, tx_hash)
);
CREATE INDEX IF NOT EXISTS claimed_works_by_tx ON claimed_works (tx_hash);
-- one row per submission: its place in the chain, its status and (court pools) its case state, kept by the triggers
-- below whenever an event of the work, a claim of it or its pool's CourtConfigured is written, moved or removed;
-- computing them in a view for every listed or counted work made pages and /metrics scan the whole history
CREATE TABLE IF NOT EXISTS works (
    work_id      TEXT PRIMARY KEY,
    pool_id      INTEGER NOT NULL,
    worker       TEXT NOT NULL,
    block_number INTEGER NOT NULL,
    log_index    INTEGER NOT NULL,
    tx_hash      TEXT NOT NULL,
    block_time   INTEGER NOT NULL,
    n_samples    INTEGER,
    given_at     INTEGER,            -- block time of its first VerdictGiven in the pool (court pools), else NULL
    decided_at   INTEGER,            -- block time of its first WorkAccepted or WorkChallenged in the pool, else NULL
    status       TEXT NOT NULL,      -- pending | accepted | rejected | paid | expired
    state        TEXT,               -- the court case: pending | verdict | disputed | final | void; NULL outside court pools
    judge        TEXT,               -- the validator of its first verdict (VerdictGiven) in the pool, else NULL
    accepted     INTEGER,            -- whether that verdict accepted it (1) or challenged it (0)
    ended        INTEGER NOT NULL,   -- 1 once it has a VerdictFinal or a CaseVoided
    disputed     INTEGER NOT NULL,   -- 1 once it has a Disputed in the pool
    resolved     INTEGER NOT NULL    -- 1 once it has a DisputeResolved
);
CREATE INDEX IF NOT EXISTS works_by_pool ON works (pool_id, block_number, log_index);
CREATE INDEX IF NOT EXISTS works_by_pool_status ON works (pool_id, status, block_number, log_index);
CREATE INDEX IF NOT EXISTS works_by_pool_state ON works (pool_id, state, block_number, log_index);
CREATE INDEX IF NOT EXISTS works_by_pool_time ON works (pool_id, block_time);
CREATE INDEX IF NOT EXISTS works_by_judge ON works (judge, pool_id, resolved);
CREATE INDEX IF NOT EXISTS works_by_worker ON works (worker, block_number, log_index);
CREATE INDEX IF NOT EXISTS works_by_worker_status ON works (worker, status, block_number, log_index);
-- submissions (and their samples) by (pool, worker, status, case state, '' outside court pools), and events (and
-- the money they move, AMOUNT) by (name, pool or -1, party or ''): what /metrics, a pool's counts and totals read,
-- kept by triggers (rows of 0 stay)
CREATE TABLE IF NOT EXISTS work_counts (
    pool_id INTEGER NOT NULL, worker TEXT NOT NULL, status TEXT NOT NULL, state TEXT NOT NULL, n INTEGER NOT NULL,
    samples INTEGER NOT NULL, PRIMARY KEY (pool_id, worker, status, state)
);
CREATE TABLE IF NOT EXISTS event_counts (
    name TEXT NOT NULL, pool_id INTEGER NOT NULL, party TEXT NOT NULL, n INTEGER NOT NULL, amount TEXT NOT NULL,
    PRIMARY KEY (name, pool_id, party)
);
-- a pool's works by seconds from submission to the first verdict (given: VerdictGiven) and to the pool's verdict
-- (decided: WorkAccepted or WorkChallenged): latency percentiles from a few hundred rows
CREATE TABLE IF NOT EXISTS latencies (
    pool_id INTEGER NOT NULL, kind TEXT NOT NULL, seconds INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (pool_id, kind, seconds)
);
-- the slashes of a pool's workers (see _pair_slashes), by (pool, worker, slasher): count and amount (decimal)
CREATE TABLE IF NOT EXISTS slash_sums (
    pool_id INTEGER NOT NULL, worker TEXT NOT NULL, slasher TEXT NOT NULL, n INTEGER NOT NULL, amount TEXT NOT NULL,
    PRIMARY KEY (pool_id, worker, slasher)
);
-- the pools each claim paid works of (n: how many of its works are the pool's)
CREATE TABLE IF NOT EXISTS claim_pools (
    tx_hash TEXT NOT NULL, pool_id INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (tx_hash, pool_id)
);
CREATE INDEX IF NOT EXISTS claim_pools_by_pool ON claim_pools (pool_id, n);
-- a pool's judged works by (first verdict's validator, whether it accepted, ended, disputed, resolved): what a court
-- validator's verdict counts read
CREATE TABLE IF NOT EXISTS judge_counts (
    pool_id INTEGER NOT NULL, judge TEXT NOT NULL, accepted INTEGER NOT NULL, ended INTEGER NOT NULL,
    disputed INTEGER NOT NULL, resolved INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (pool_id, judge, accepted, ended, disputed, resolved)
);
-- a pool's verdicts (WorkAccepted, WorkChallenged) by block: how many it had by a block, from one row a block
CREATE TABLE IF NOT EXISTS verdict_blocks (
    pool_id INTEGER NOT NULL, name TEXT NOT NULL, block_number INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (pool_id, name, block_number)
);
CREATE TRIGGER IF NOT EXISTS event_added AFTER INSERT ON events BEGIN
    {_count_event('NEW', 1)}
    {_count_verdict('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS event_removed AFTER DELETE ON events BEGIN
    {_count_event('OLD', -1)}
    {_count_verdict('OLD', -1)}
END;
CREATE TRIGGER IF NOT EXISTS event_recounted AFTER UPDATE OF name, pool_id, party, data ON events
  WHEN OLD.name IS NOT NEW.name OR OLD.pool_id IS NOT NEW.pool_id OR OLD.party IS NOT NEW.party
    OR OLD.data IS NOT NEW.data BEGIN
    {_count_event('OLD', -1)}
    {_count_event('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS verdict_moved AFTER UPDATE OF name, pool_id, block_number ON events
  WHEN OLD.name IS NOT NEW.name OR OLD.pool_id IS NOT NEW.pool_id OR OLD.block_number IS NOT NEW.block_number BEGIN
    {_count_verdict('OLD', -1)}
    {_count_verdict('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS slash_added AFTER INSERT ON events
  WHEN NEW.name IN ('Slashed', 'WorkChallenged') BEGIN
    {_pair_slashes('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS slash_removed AFTER DELETE ON events
  WHEN OLD.name IN ('Slashed', 'WorkChallenged') BEGIN
    {_pair_slashes('OLD', -1)}
END;
CREATE TRIGGER IF NOT EXISTS slash_changed AFTER UPDATE ON events
  WHEN (OLD.name IN ('Slashed', 'WorkChallenged') OR NEW.name IN ('Slashed', 'WorkChallenged'))
    AND (OLD.name IS NOT NEW.name OR OLD.pool_id IS NOT NEW.pool_id OR OLD.worker IS NOT NEW.worker
         OR OLD.data IS NOT NEW.data) BEGIN
    {_pair_slashes('OLD', -1)}
    {_pair_slashes('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS work_event_added AFTER INSERT ON events WHEN NEW.work_id IS NOT NULL BEGIN
    {_refresh_work('NEW.work_id')}
END;
CREATE TRIGGER IF NOT EXISTS work_event_removed AFTER DELETE ON events WHEN OLD.work_id IS NOT NULL BEGIN
    {_refresh_work('OLD.work_id')}
END;
CREATE TRIGGER IF NOT EXISTS work_event_changed AFTER UPDATE ON events
  WHEN OLD.work_id IS NOT NULL AND (OLD.work_id IS NOT NEW.work_id OR OLD.name IS NOT NEW.name
    OR OLD.pool_id IS NOT NEW.pool_id OR OLD.worker IS NOT NEW.worker OR OLD.block_number IS NOT NEW.block_number
    OR OLD.log_index IS NOT NEW.log_index) BEGIN
    {_refresh_work('OLD.work_id')}
END;
CREATE TRIGGER IF NOT EXISTS work_event_renamed AFTER UPDATE OF work_id ON events
  WHEN NEW.work_id IS NOT NULL AND NEW.work_id IS NOT OLD.work_id BEGIN
    {_refresh_work('NEW.work_id')}
END;
CREATE TRIGGER IF NOT EXISTS work_claimed AFTER INSERT ON claimed_works BEGIN
    {_refresh_work('NEW.work_id')}
    {_claim_pool('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS work_unclaimed AFTER DELETE ON claimed_works BEGIN
    {_refresh_work('OLD.work_id')}
    {_claim_pool('OLD', -1)}
END;
CREATE TRIGGER IF NOT EXISTS court_configured AFTER INSERT ON events WHEN NEW.name = 'CourtConfigured' BEGIN
    UPDATE works SET state = {CASE_STATE.format(w='works.work_id', pool='works.pool_id')} WHERE pool_id = NEW.pool_id;
END;
CREATE TRIGGER IF NOT EXISTS court_unconfigured AFTER DELETE ON events WHEN OLD.name = 'CourtConfigured' BEGIN
    UPDATE works SET state = {CASE_STATE.format(w='works.work_id', pool='works.pool_id')} WHERE pool_id = OLD.pool_id;
END;
CREATE TRIGGER IF NOT EXISTS work_counted AFTER INSERT ON works BEGIN
    {_count_work('NEW', 1)}
END;
CREATE TRIGGER IF NOT EXISTS work_uncounted AFTER DELETE ON works BEGIN
    {_count_work('OLD', -1)}
END;
CREATE TRIGGER IF NOT EXISTS work_recounted AFTER UPDATE ON works
  WHEN OLD.pool_id IS NOT NEW.pool_id OR OLD.worker IS NOT NEW.worker OR OLD.status IS NOT NEW.status
    OR OLD.state IS NOT NEW.state OR OLD.n_samples IS NOT NEW.n_samples OR OLD.block_time IS NOT NEW.block_time
    OR OLD.given_at IS NOT NEW.given_at OR OLD.decided_at IS NOT NEW.decided_at OR OLD.judge IS NOT NEW.judge
    OR OLD.accepted IS NOT NEW.accepted OR OLD.ended IS NOT NEW.ended OR OLD.disputed IS NOT NEW.disputed
    OR OLD.resolved IS NOT NEW.resolved BEGIN
    {_count_work('OLD', -1)}
    {_count_work('NEW', 1)}
END;
CREATE VIEW IF NOT EXISTS work_status AS
    SELECT w.work_id, w.pool_id, w.worker, w.block_number, s.block_time, w.tx_hash, w.log_index, s.data, w.status
    FROM works w JOIN events s ON s.tx_hash = w.tx_hash AND s.log_index = w.log_index;
CREATE VIEW IF NOT EXISTS court_cases AS
    SELECT w.work_id, w.pool_id, w.worker, w.block_number, s.block_time, w.tx_hash, w.log_index, s.data,
           w.state AS state
    FROM works w JOIN events s ON s.tx_hash = w.tx_hash AND s.log_index = w.log_index WHERE w.state IS NOT NULL;
"""

COURT_WORK_EVENTS = ("AssignmentDrawn", "VoteCommitted", "VoteRevealed", "DisputeResolved", "DisputeReopened")
"""Court events that name a work but not its pool."""


Row = dict[str, Any]
"""A row of a read query (`Store.select`): column → value, the `data` column decoded: the event's fields as the
indexer wrote them (amounts decimal strings, bytes 0x-hex), a shape of its own per event name."""


@dataclass(frozen=True)
class StoredObject:
    """An IPFS object in the cache. `body`: its JSON, None until fetched: anyone's document (a run spec, a metrics
    object, an evidence document), but for a manifest what the fetcher kept of it after validating it."""

    digest: str
    kind: Literal["runspec", "manifest", "metrics", "evidence"]
    error: str | None
    attempts: int
    body: JsonValue


@dataclass(frozen=True)
class EventRow:
    """One chain event as stored."""

    tx_hash: str
    log_index: int
    contract: str
    ordinal: int
    name: str
    block_number: int
    block_hash: str
    block_time: int
    pool_id: int | None
    work_id: str | None
    worker: str | None
    party: str | None
    data: dict[str, JsonValue]


class Store:
    """One connection to the index (one per thread; SQLite connections are not shared)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # each Store is used by one thread at a time; check_same_thread=False lets it be built in another
        self.db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.create_function("dec_add", 2, dec_add, deterministic=True)  # the triggers add up amounts with it
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=10000")
        self._migrate()
        self.db.executescript(SCHEMA)

    def _migrate(self) -> None:
        """Rebuild an index written by another schema version (the chain is the source; IPFS objects are kept)."""
        with self.transaction():
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return
            marks = ", ".join("?" * len(DERIVED))
            kinds = dict(self.db.execute(f"SELECT name, type FROM sqlite_master WHERE name IN ({marks})",
                                         DERIVED).fetchall())
            for name, kind in kinds.items():
                self.db.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} IF EXISTS {name}")
            self.db.execute("DROP TABLE IF EXISTS events")
            self.db.execute("DROP TABLE IF EXISTS meta")
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -------------------------------------------------------------- meta

    def get_meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row["value"])

    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (key, json.dumps(value)))

    # -------------------------------------------------------------- events

    def upsert_event(self, row: EventRow) -> None:
        # Delete a row under the same cursor key first: a transaction re-included after a reorg
        # may come back at another log index.
        self.db.execute("DELETE FROM events WHERE contract = ? AND tx_hash = ? AND ordinal = ? AND log_index != ?",
                        (row.contract, row.tx_hash, row.ordinal, row.log_index))
        self.db.execute(
            """INSERT INTO events (tx_hash, log_index, contract, ordinal, name, block_number, block_hash, block_time,
                                   pool_id, work_id, worker, party, data)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT(tx_hash, log_index) DO UPDATE SET
                 contract = excluded.contract, ordinal = excluded.ordinal, name = excluded.name,
                 block_number = excluded.block_number, block_hash = excluded.block_hash,
                 block_time = excluded.block_time, pool_id = excluded.pool_id, work_id = excluded.work_id,
                 worker = excluded.worker, party = excluded.party, data = excluded.data""",
            (row.tx_hash, row.log_index, row.contract, row.ordinal, row.name, row.block_number, row.block_hash,
             row.block_time, row.pool_id, row.work_id, row.worker, row.party, json.dumps(row.data)),
        )
        if row.name == "RewardsClaimed":  # the works it paid, one indexed row each
            self.db.execute("DELETE FROM claimed_works WHERE tx_hash = ?", (row.tx_hash,))
            self.db.executemany("INSERT OR IGNORE INTO claimed_works (work_id, tx_hash) VALUES (?, ?)",
                                [(w, row.tx_hash) for w in row.data.get("work_ids") or []])

    def link_court_rows(self) -> None:
        """Fill what court events leave out, from rows of the same index: the pool of an event that names only a
        work (from the work's submission), and the work (and pool) of a credit or withdrawal from the court event
        of the same transaction (a verdict, a finalisation or a resolution decides one work). Rows whose
        submission is not indexed yet are filled on a later poll; the result is the same as a fresh index's."""
        names = ", ".join(f"'{n}'" for n in COURT_WORK_EVENTS)
        self.db.execute(f"""UPDATE events SET pool_id = (SELECT s.pool_id FROM events s WHERE s.name = 'WorkSubmitted'
                                                         AND s.work_id = events.work_id)
                            WHERE pool_id IS NULL AND name IN ({names})""")
        self.db.execute("""UPDATE events SET
                             work_id = (SELECT w.work_id FROM events w WHERE w.tx_hash = events.tx_hash
                                        AND w.contract = 'ValidatorCourt' AND w.work_id IS NOT NULL
                                        ORDER BY w.log_index LIMIT 1),
                             pool_id = (SELECT w.pool_id FROM events w WHERE w.tx_hash = events.tx_hash
                                        AND w.contract = 'ValidatorCourt' AND w.pool_id IS NOT NULL
                                        ORDER BY w.log_index LIMIT 1)
                           WHERE contract = 'ValidatorCourt' AND name IN ('Credited', 'Withdrawn')
                             AND (work_id IS NULL OR pool_id IS NULL)""")

    def remove_event(self, contract: str, tx_hash: str, ordinal: int) -> int:
        """Delete the event with this cursor key (its block left the chain); returns rows deleted."""
        removed = self.db.execute("DELETE FROM events WHERE contract = ? AND tx_hash = ? AND ordinal = ?",
                                  (contract, tx_hash, ordinal)).rowcount
        self.db.execute("DELETE FROM claimed_works WHERE tx_hash = ? AND NOT EXISTS (SELECT 1 FROM events "
                        "WHERE tx_hash = ? AND name = 'RewardsClaimed')", (tx_hash, tx_hash))
        return removed

    def move_event(self, contract: str, tx_hash: str, ordinal: int, block_number: int, block_hash: str,
                   log_index: int, block_time: int) -> None:
        """Record that a re-included transaction's event now lives in another block."""
        self.db.execute("UPDATE events SET block_number = ?, block_hash = ?, log_index = ?, block_time = ? "
                        "WHERE contract = ? AND tx_hash = ? AND ordinal = ?",
                        (block_number, block_hash, log_index, block_time, contract, tx_hash, ordinal))

    def blocks_since(self, block_number: int) -> list[tuple[int, str]]:
        """Distinct (number, hash) of blocks holding indexed events, newest first."""
        rows = self.db.execute("SELECT DISTINCT block_number, block_hash FROM events WHERE block_number >= ? "
                               "ORDER BY block_number DESC", (block_number,))
        return [(r["block_number"], r["block_hash"]) for r in rows]

    def events_in_block(self, block_number: int) -> list[EventRow]:
        return [self._row(r) for r in self.db.execute("SELECT * FROM events WHERE block_number = ?", (block_number,))]

    def all_events(self) -> list[tuple]:
        """Every row, in a stable order (for comparing two indexes)."""
        return [tuple(r) for r in self.db.execute("SELECT * FROM events ORDER BY tx_hash, log_index")]

    def count_events(self) -> dict[str, int]:
        """Events in the index by name (from `event_counts`, kept as rows are written)."""
        return {r["name"]: r["n"] for r in self.db.execute(
            "SELECT name, SUM(n) AS n FROM event_counts GROUP BY name HAVING SUM(n) > 0")}

    @staticmethod
    def _row(r: sqlite3.Row) -> EventRow:
        return EventRow(r["tx_hash"], r["log_index"], r["contract"], r["ordinal"], r["name"], r["block_number"],
                        r["block_hash"], r["block_time"], r["pool_id"], r["work_id"], r["worker"], r["party"],
                        json.loads(r["data"]))

    def select(self, sql: str, params: tuple = ()) -> list[Row]:
        """Rows of a read query as dicts, with the `data` column decoded."""
        out = []
        for r in self.db.execute(sql, params):
            d = dict(r)
            if "data" in d and isinstance(d["data"], str):
                d["data"] = json.loads(d["data"])
            out.append(d)
        return out

    def scalar(self, sql: str, params: tuple = ()) -> Any:
        row = self.db.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def newest_first(self, source: str, params: tuple, offset: int, limit: int,
                     total: int | None = None) -> tuple[int, list[Row]]:
        """(how many rows `source` — "FROM … WHERE …" — has (`total` when the caller knows it from a count the
        index keeps), and the page of them at `offset`, newest first)."""
        if total is None:
            total = self.scalar(f"SELECT COUNT(*) {source}", params)
        rows = self.select(f"SELECT * {source} ORDER BY block_number DESC, log_index DESC LIMIT ? OFFSET ?",
                           (*params, limit, offset))
        return total, rows

    def newest_works(self, view: str, where: str, params: tuple, offset: int, limit: int) -> list[Row]:
        """The page at `offset` of `view`'s rows (work_status or court_cases) whose works match `where` (a condition
        on `works`' columns), newest first: the page is picked from a works index by rowid (so an offset walks that
        index only, not the view's join), then its rows are read."""
        return self.select(f"SELECT v.* FROM (SELECT rowid AS k FROM works WHERE {where} ORDER BY block_number DESC, "
                           f"log_index DESC LIMIT ? OFFSET ?) p CROSS JOIN works w ON w.rowid = p.k CROSS JOIN {view} v "
                           "ON v.work_id = w.work_id ORDER BY v.block_number DESC, v.log_index DESC",
                           (*params, limit, offset))

    def newest_of_names(self, pool_id: int, names: tuple[str, ...], offset: int, limit: int) -> tuple[int, list[Row]]:
        """(how many events of `names` the pool has, and the page of them at `offset`, newest first): each name's
        newest `offset + limit` read from `events_by_pool`, merged, so a page reads no more than that."""
        total = self.scalar(f"SELECT COALESCE(SUM(n), 0) FROM event_counts WHERE pool_id = ? AND name IN "
                            f"({', '.join('?' * len(names))})", (pool_id, *names))
        each = " UNION ALL ".join("SELECT * FROM (SELECT * FROM events WHERE pool_id = ? AND name = ? "
                                  "ORDER BY block_number DESC, log_index DESC LIMIT ?)" for _ in names)
        params = tuple(p for name in names for p in (pool_id, name, offset + limit))
        return total, self.select(f"SELECT * FROM ({each}) ORDER BY block_number DESC, log_index DESC LIMIT ? OFFSET ?",
                                  (*params, limit, offset))

    # -------------------------------------------------------------- IPFS objects

    def want_object(self, digest: str, kind: str) -> None:
        """Ask the fetcher for an object (no-op when it is known already)."""
        self.db.execute("INSERT INTO objects (digest, kind) VALUES (?, ?) ON CONFLICT(digest) DO NOTHING",
                        (digest, kind))

    def object(self, digest: str) -> StoredObject | None:
        """The cached object's row: kind, body (decoded, or None until fetched), error."""
        return self.objects([digest]).get(digest)

    def objects(self, digests: list[str]) -> dict[str, StoredObject]:
        """The cached objects among `digests` (one query), by digest."""
        rows = self.db.execute("SELECT * FROM objects WHERE digest IN (SELECT value FROM json_each(?))",
                               (json.dumps(digests),))
        return {r["digest"]: StoredObject(digest=r["digest"], kind=r["kind"], error=r["error"], attempts=r["attempts"],
                                          body=None if r["body"] is None else json.loads(r["body"])) for r in rows}

    def objects_due(self, limit: int = 20) -> list[tuple[str, str]]:
        rows = self.db.execute("SELECT digest, kind FROM objects WHERE body IS NULL AND retry_after <= ? "
                               "ORDER BY attempts, rowid LIMIT ?", (time.time(), limit))
        return [(r["digest"], r["kind"]) for r in rows]

    def put_object_body(self, digest: str, body: JsonValue) -> None:
        self.db.execute("UPDATE objects SET body = ?, error = NULL WHERE digest = ?", (json.dumps(body), digest))

    def object_failed(self, digest: str, error: str, backoff_s: float) -> None:
        self.db.execute("UPDATE objects SET error = ?, attempts = attempts + 1, retry_after = ? WHERE digest = ?",
                        (error, time.time() + backoff_s, digest))
