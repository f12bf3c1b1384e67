"""The explorer at a long history: every API route, page and /metrics timed over an index of N files.

    python -m bench.explorer_scale [--files N] [--quick] [--workers W] [--reps R] [--db PATH] [--record [PROFILE]]

Issue 46 ("a thousand workers"): every page and `/metrics` within 100 ms at 1 M files. A synthetic history of N
submissions (default 1,000,000; `--quick` 100,000) by W workers (default 1,000) goes into a real index
(dashboard/store.py) through the indexer's own `ChainIndexer._apply` and `Store.link_court_rows`, batch by batch in
one transaction each as `poll_once` writes a poll — only the chain reads the indexer makes (block times, a claim's
calldata) are stubbed. Two pools: pool 1 judged by 4 listed validators (the bulk of the files), pool 2 by the
ValidatorCourt, the same 4 registered (one file in 20: `VerdictGiven`, `VerdictFinal`, then the pool's verdict). Each file is accepted
(2 % challenged with the worker's `Slashed` in the same transaction, the newest few hundred still pending); every
worker claims its accepted files 20 at a time (`RewardsClaimed`); the trainer publishes a checkpoint every 1,000 files,
whose manifest and metrics the IPFS cache holds (written by the `Store` calls `ObjectFetcher.fetch_due` makes).

Then the app of dashboard/app.py (FastAPI's TestClient, the views over a `ThreadLocalExplorer` as the service
builds it, the live chain a stand-in answering fixed pool state) answers each route R times (default 20; a route
stops early after 10 s, with at least 3 answers): p50 and p99 (nearest rank) per route.

Figures: `files`, `events`, `insert_s`, `db_mb`, `explorer_p99_ms_1m` (the worst route's p99, under that name at any
N: the issue's figure; `files` says at which N it was measured), `worst_route`, `routes` {route: {p50_ms, p99_ms,
n}}. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from fastapi.testclient import TestClient

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, print_rows
from dashboard.app import ThreadLocalExplorer, create_app
from dashboard.court import percentile
from dashboard.indexer import ChainIndexer
from dashboard.models import LivePool
from dashboard.store import Store
from dashboard.views import Explorer
from ledger_client.chain.bindings import (
    CheckpointPublished,
    CourtConfigured,
    PoolCreated,
    RewardsClaimed,
    Slashed,
    ValidatorRegistered,
    ValidatorSet,
    VerdictFinal,
    VerdictGiven,
    WorkAccepted,
    WorkChallenged,
    WorkerJoined,
    WorkSubmitted,
)
from ledger_client.chain.contract import EventMeta
from protocol.digest import WorkId, cid_to_digest, digest_to_cid, hex_text

LISTED_POOL, COURT_POOL = 1, 2
COURT_EVERY = 20  # one file in 20 goes to the court pool
CHALLENGE_EVERY = 50  # 2 % of files are challenged
CLAIM_BATCH = 20  # works per RewardsClaimed
CHECKPOINT_EVERY = 1_000  # files per policy step
FILES_PER_BLOCK = 10
PENDING_TAIL = 300  # the newest files stay without a verdict
EVENTS_PER_POLL = 20_000  # rows per transaction, as one poll of the indexer writes them
POOL_ADDRESS = "0x" + "c0" * 20
COURT_ADDRESS = "0x" + "cc" * 20
VALIDATORS = [f"0x{i:040x}" for i in range(0xB0, 0xB4)]
COURT_PARAMS = {"validator_bond": 10**18, "verdict_fee": 10**15, "dispute_bond": 10**17, "non_voter_penalty": 10**16,
                "silence_penalty": 10**16, "assigned_window": 60, "verdict_window": 600, "dispute_window": 600,
                "commit_period": 30, "reveal_period": 30, "committee_size": 3, "wrong_verdict_slash": 10**17,
                "activation_delay": 60}


def worker_address(i: int) -> str:
    return f"0x{0xA0_0000 + i:040x}"


def work_id(i: int) -> bytes:
    return (i + 1).to_bytes(32, "big")


class HistoryWriter:
    """Writes chain events through the indexer's `_apply`, one transaction per `EVENTS_PER_POLL` rows."""

    def __init__(self, store: Store):
        self.store = store
        self.indexer = ChainIndexer.__new__(ChainIndexer)  # no chain: the two reads it makes are stubbed
        self.indexer.store = store
        self.indexer._block_time = lambda number, _hash: 1_700_000_000 + 2 * number
        self.claims: dict[bytes, list[str]] = {}
        self.indexer._claimed_work_ids = lambda tx_hash: self.claims.pop(bytes(tx_hash))
        self.tx = 0
        self.block = 1
        self.events = 0
        self._in_poll = 0
        self._log_block = self._next_log = 0

    def next_tx(self) -> bytes:
        self.tx += 1
        return self.tx.to_bytes(32, "big")

    def meta(self, tx: bytes) -> EventMeta:
        """The next log of the current block (log indexes count up within a block, as on a chain)."""
        if self._log_block != self.block:
            self._log_block, self._next_log = self.block, 0
        self._next_log += 1
        return EventMeta(block_number=self.block, block_hash=self.block.to_bytes(32, "big"), tx_hash=tx,
                         log_index=self._next_log - 1, address="0x0")

    def apply(self, contract: str, ordinal: int, event: object) -> None:
        self.indexer._apply(contract, ordinal, event)
        self.events += 1
        self._in_poll += 1

    def transaction(self, *events: tuple[str, Callable[[EventMeta], object]]) -> None:
        """One chain transaction: its events in order (each built from its meta), ordinals per contract."""
        tx = self.next_tx()
        ordinals: dict[str, int] = {}
        for contract, build in events:
            ordinal = ordinals.get(contract, 0)
            ordinals[contract] = ordinal + 1
            self.apply(contract, ordinal, build(self.meta(tx)))

    @contextmanager
    def polls(self) -> Iterator[None]:
        """Transactions of `EVENTS_PER_POLL` rows, each ended by `link_court_rows` as `poll_once` ends a poll."""
        self.store.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.store.link_court_rows()
            self.store.db.execute("COMMIT")
        except BaseException:
            self.store.db.execute("ROLLBACK")
            raise

    def maybe_commit(self) -> None:
        if self._in_poll >= EVENTS_PER_POLL:
            self.store.link_court_rows()
            self.store.db.execute("COMMIT")
            self.store.db.execute("BEGIN IMMEDIATE")
            self._in_poll = 0


def synthetic_history(store: Store, files: int, workers: int = 1_000,
                      progress: Callable[[int], None] | None = None) -> dict[str, object]:
    """Index a history of `files` submissions (module docstring); returns what to visit (`visits`) and the number
    of events written."""
    w = HistoryWriter(store)
    evidence = "0x" + "ee" * 32
    accepted: dict[str, list[bytes]] = {}  # worker → accepted works not yet claimed
    with w.polls():
        for pool in (LISTED_POOL, COURT_POOL):
            w.transaction(("ComputePool", lambda m, p=pool: PoolCreated(p, POOL_ADDRESS, "0x" + "70" * 20,
                                                                        bytes([p]) * 32, b"\0" * 32, m)))
        w.transaction(("ValidatorCourt", lambda m: CourtConfigured(COURT_POOL, COURT_PARAMS, m)))
        for index, v in enumerate(VALIDATORS):
            w.transaction(("ComputePool", lambda m, v=v: ValidatorSet(LISTED_POOL, v, True, m)))
            w.transaction(("ValidatorCourt", lambda m, v=v, i=index: ValidatorRegistered(COURT_POOL, v, i, 10**18, m)))
        for i in range(workers):
            pools = (LISTED_POOL, COURT_POOL) if i % COURT_EVERY == 0 or workers < COURT_EVERY else (LISTED_POOL,)
            for pool in pools:
                w.transaction(("ComputePool", lambda m, p=pool, i=i: WorkerJoined(p, worker_address(i), i, m)))
        w.block += 1
        for i in range(files):
            if i % FILES_PER_BLOCK == 0:
                w.block += 1
            court = i % COURT_EVERY == 0
            pool = COURT_POOL if court else LISTED_POOL
            wi = i % workers
            if court and workers >= COURT_EVERY:
                wi -= wi % COURT_EVERY  # a worker of the court pool
            worker, wid = worker_address(wi), work_id(i)
            if i % CHECKPOINT_EVERY == 0:
                for p in (LISTED_POOL, COURT_POOL):
                    step = i // CHECKPOINT_EVERY + 1
                    w.transaction(("ComputePool", lambda m, p=p, s=step: CheckpointPublished(
                        p, s, (p * 10**9 + s).to_bytes(32, "big"), m)))
            w.transaction(("ComputePool", lambda m: WorkSubmitted(pool, wid, worker, wid, i // CHECKPOINT_EVERY,
                                                                  i // workers, 8, w.block, m)))
            if i >= files - PENDING_TAIL:
                w.maybe_commit()
                continue
            challenged = i % CHALLENGE_EVERY == 7
            validator = COURT_ADDRESS if court else VALIDATORS[i % len(VALIDATORS)]
            judge = VALIDATORS[i % len(VALIDATORS)]
            if court:
                w.transaction(("ValidatorCourt", lambda m: VerdictGiven(
                    pool, wid, judge, not challenged, 3 if challenged else 0,
                    bytes.fromhex(evidence[2:]) if challenged else b"\0" * 32, m)))
            pool_verdict: list[tuple[str, Callable[[EventMeta], object]]] = []
            if court:
                pool_verdict.append(("ValidatorCourt", lambda m: VerdictFinal(pool, wid, not challenged, judge,
                                                                              10**15, m)))
            if challenged:
                pool_verdict += [("StakeManager", lambda m: Slashed(POOL_ADDRESS, worker, validator, 10**18,
                                                                    10**17, m)),
                                 ("ComputePool", lambda m: WorkChallenged(pool, wid, validator, 3,
                                                                          bytes.fromhex(evidence[2:]), 10**18, m))]
            else:
                pool_verdict.append(("ComputePool", lambda m: WorkAccepted(pool, wid, validator, m)))
                accepted.setdefault(worker, []).append(wid)
            w.transaction(*pool_verdict)
            if len(accepted.get(worker, [])) >= CLAIM_BATCH:
                paid = accepted.pop(worker)
                tx = w.tx + 1
                w.claims[tx.to_bytes(32, "big")] = [WorkId(x).text for x in paid]
                w.transaction(("ComputePool", lambda m: RewardsClaimed(worker, 8 * 10**15 * len(paid), paid, m)))
            w.maybe_commit()
            if progress and i and i % 100_000 == 0:
                progress(i)
    with store.transaction():  # what ObjectFetcher.fetch_due writes for each manifest it fetched, and its metrics
        for (digest,) in store.db.execute("SELECT digest FROM objects WHERE kind = 'manifest'").fetchall():
            step = int(digest, 16) % 10**9
            metrics_cid = digest_to_cid((int(digest, 16) + 2**255).to_bytes(32, "big"))
            store.put_object_body(digest, {"step": step, "parent": None, "dtype": "bfloat16", "shards": 1,
                                           "total_bytes": 10**9, "metrics": metrics_cid})
            store.want_object(hex_text(cid_to_digest(metrics_cid)), "metrics")
            store.put_object_body(hex_text(cid_to_digest(metrics_cid)), {
                "step": step, "reward": 0.5, "files_consumed": CHECKPOINT_EVERY - COURT_EVERY,
                "staleness_histogram": {"0": 40, "1": 20}})
    return visits(files, workers) | {"events": w.events}


def visits(files: int, workers: int) -> dict[str, object]:
    """What the timed routes visit in a history of `files` by `workers`: a worker, a work, a challenged work and its
    evidence digest, a validator and a court case."""
    last_court = (files - PENDING_TAIL - 1) // COURT_EVERY * COURT_EVERY
    challenged_work = max(0, (files - PENDING_TAIL - 1 - 7) // CHALLENGE_EVERY * CHALLENGE_EVERY + 7)
    return {"worker": worker_address(1 % workers), "work": WorkId(work_id(files // 2)).text,
            "challenged_work": WorkId(work_id(challenged_work)).text, "evidence": "0x" + "ee" * 32,
            "validator": VALIDATORS[0], "case": WorkId(work_id(max(0, last_court))).text}


class StandInChain:
    """The live chain for the views: fixed pool state, nothing else known (as while the RPC is unreachable)."""

    def __init__(self) -> None:
        self.pool = SimpleNamespace(address=POOL_ADDRESS)
        self.court = SimpleNamespace(address=COURT_ADDRESS)
        self.state = LivePool(owner=POOL_ADDRESS, trainer="0x" + "70" * 20, status="active", latest_step=1,
                              budget=str(10**24), reserved="0", min_stake=str(10**18),
                              reward_per_sample=str(10**15), slash_amount=str(10**18), bounty_bps=1000,
                              challenge_window_s=600, reward_lock_s=1200, async_level=2, task_ref="0x" + "01" * 32,
                              base_checkpoint="0x" + "00" * 32, max_samples_per_work=64, spot_check_bps=1000,
                              active=True)

    def head(self) -> int:
        return 10**7

    def now(self) -> int:
        return 1_800_000_000

    def pool_state(self, _pool_id: int) -> LivePool:
        return self.state

    def fee_budget(self, _pool_id: int) -> str:
        return str(10**20)

    def __getattr__(self, _name: str) -> Callable[..., None]:
        return lambda *_args: None  # member, stake_of, block_hash, court_validator, court_account, assigned


def routes(ids: dict[str, object]) -> list[str]:
    """Every route the app serves that the page (dashboard/static/app.js) or a scraper asks for."""
    p, c, wk, wo, v = LISTED_POOL, COURT_POOL, ids["worker"], ids["work"], ids["validator"]
    out = ["/metrics", "/", "/pool/1", "/summary", "/api/status", "/api/summary", "/api/pools"]
    for pool in (p, c):
        out += [f"/api/pools/{pool}", f"/api/pools/{pool}/checkpoints", f"/api/pools/{pool}/curve",
                f"/api/pools/{pool}/workers", f"/api/pools/{pool}/validators", f"/api/pools/{pool}/submissions",
                f"/api/pools/{pool}/submissions?status=accepted", f"/api/pools/{pool}/verdicts",
                f"/api/pools/{pool}/slashes", f"/api/pools/{pool}/claims", f"/api/pools/{pool}/stats",
                f"/api/pools/{pool}/trainer"]
    out += [f"/api/pools/{p}/submissions?offset=100000&limit=50",
            f"/api/pools/{c}/court", f"/api/pools/{c}/cases", f"/api/pools/{c}/court/validators?limit=100",
            f"/api/cases/{ids['case']}", f"/api/validators/{v}", f"/api/validators/{v}/verdicts",
            f"/api/validators/{v}/earnings", f"/api/workers/{wk}", f"/api/workers/{wk}/submissions",
            f"/api/works/{wo}", f"/api/works/{wo}/timeline", f"/api/works/{ids['challenged_work']}",
            f"/api/works/{ids['case']}", f"/api/evidence/{ids['evidence']}"]
    return out


def time_routes(client: TestClient, paths: list[str], reps: int, budget_s: float = 10.0) -> dict[str, dict]:
    """{path: {p50_ms, p99_ms, n, status}}: each path answered `reps` times (fewer once `budget_s` is spent, ≥ 3)."""
    out = {}
    for path in paths:
        times, status = [], None
        start = time.perf_counter()
        while len(times) < reps and (len(times) < 3 or time.perf_counter() - start < budget_s):
            t0 = time.perf_counter()
            answer = client.get(path, follow_redirects=False)
            times.append(1000 * (time.perf_counter() - t0))
            status = answer.status_code
        out[path] = {"p50_ms": round(percentile(times, 50), 2), "p99_ms": round(percentile(times, 99), 2),
                     "n": len(times), "status": status}
    return out


def run(files: int, workers: int, reps: int, db: Path) -> dict[str, object]:
    """Write the history into `db` (or time an index an earlier run left there, with the `insert_s` that run
    measured, kept in the index's meta table), then the routes."""
    store = Store(db)
    if store.scalar("SELECT COUNT(*) FROM events") == 0:
        t0 = time.perf_counter()
        synthetic_history(store, files, workers, progress=lambda i: print(
            f"  indexed {i:,} files ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True))
        with store.transaction():
            store.set_meta("bench_insert_s", round(time.perf_counter() - t0, 1))
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    elif store.scalar("SELECT COUNT(*) FROM works") != files:
        raise ValueError(f"the index {db} holds {store.scalar('SELECT COUNT(*) FROM works')} files, not {files}")
    ids = visits(files, workers) | {"events": store.scalar("SELECT COUNT(*) FROM events")}
    insert_s = store.get_meta("bench_insert_s")
    store.close()
    summary = db.parent / "summary.json"
    summary.write_text('{"demo": "bench"}')
    live = StandInChain()
    app = create_app(ThreadLocalExplorer(lambda: Explorer(Store(db), live)), summary_path=summary)  # type: ignore[arg-type]
    with TestClient(app) as client:
        timed = time_routes(client, routes(ids), reps)
    worst = max(timed, key=lambda r: timed[r]["p99_ms"])
    return {"files": files, "workers": workers, "events": ids["events"], "insert_s": insert_s,
            "db_mb": round(db.stat().st_size / 2**20, 1), "explorer_p99_ms_1m": timed[worst]["p99_ms"],
            "worst_route": worst, "routes": timed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.explorer_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1_000_000, help="submissions in the history (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="100,000 files (a few minutes on 2 cores)")
    parser.add_argument("--workers", type=int, default=1_000, help="workers submitting (default 1,000)")
    parser.add_argument("--reps", type=int, default=20, help="answers timed per route (default 20)")
    parser.add_argument("--db", type=Path, help="index file to write and keep (default: a temporary one, removed "
                        "after); one an earlier run wrote with the same --files is timed again without rewriting it")
    add_record_option(parser)
    args = parser.parse_args(argv)
    files = 100_000 if args.quick else args.files
    if files < 1 or args.workers < 1 or args.reps < 1:
        print("error: --files, --workers and --reps must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="explorer-scale-") as tmp:
        try:
            result = run(files, args.workers, args.reps, args.db or Path(tmp) / "index.db")
        except (ValueError, OSError, sqlite3.Error) as exc:
            print(f"error: --db {args.db}: {exc}" if args.db and isinstance(exc, sqlite3.Error) else f"error: {exc}",
                  file=sys.stderr)
            return 2
    rows = [("files", f"{result['files']:,}"), ("events", f"{result['events']:,}"),
            ("insert_s", str(result["insert_s"])),
            ("db_mb", str(result["db_mb"]))]
    rows += [(f"{path} p50/p99 ms", f"{r['p50_ms']:.1f}/{r['p99_ms']:.1f}") for path, r in result["routes"].items()]
    rows.append(("worst p99 ms", f"{result['explorer_p99_ms_1m']:.1f}"))
    print_rows(rows, result, args, "explorer_scale")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    sys.exit(main())
