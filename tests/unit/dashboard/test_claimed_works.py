"""The explorer's "paid" status reads an index of claimed works (issue 46, finding 5): each `RewardsClaimed` row the
indexer writes puts the works it paid into the `claimed_works` table (dashboard/store.py), so a work's status looks
its claim up by key instead of scanning every claim's JSON (and since schema 4 a trigger keeps the status in `works`
when the claim is written) — pages and /metrics grew quadratically with the history
(0.15 s → 15.1 s for a works page from 500 to 4,000 files). A reorg that drops the claim takes its rows with it. The
synthetic history goes through the indexer's own `_apply` (only the chain reads it makes are stubbed); the indexer
against anvil: tests/integration/test_dashboard.py."""

from __future__ import annotations

from dashboard.indexer import ChainIndexer
from dashboard.store import Store
from ledger_client.chain.bindings import RewardsClaimed, WorkAccepted, WorkSubmitted
from ledger_client.chain.contract import EventMeta
from protocol.digest import WorkId

POOL = 1
WORKS, PER_CLAIM = 600, 20


def meta(tx: int, block: int) -> EventMeta:
    return EventMeta(block_number=block, block_hash=block.to_bytes(32, "big"), tx_hash=tx.to_bytes(32, "big"),
                     log_index=0, address="0x0")


def indexed_history(store: Store) -> None:
    """WORKS submissions, each accepted; every PER_CLAIM of them claimed together; the last PER_CLAIM unclaimed."""
    indexer = ChainIndexer.__new__(ChainIndexer)  # no chain: its reads stubbed below
    indexer.store = store
    indexer._block_time = lambda number, _hash: 2 * number
    claims: dict[bytes, list[str]] = {}
    indexer._claimed_work_ids = lambda tx_hash: claims[bytes(tx_hash)]
    work = [i.to_bytes(32, "big") for i in range(1, WORKS + 1)]
    tx = 0
    with store.transaction():
        for i, w in enumerate(work):
            tx += 1
            indexer._apply("ComputePool", 0, WorkSubmitted(POOL, w, "0xA", b"\xaa" * 32, 0, i, 8, 0, meta(tx, i)))
            tx += 1
            indexer._apply("ComputePool", 0, WorkAccepted(POOL, w, "0xB", meta(tx, i + 1)))
        for start in range(0, WORKS - PER_CLAIM, PER_CLAIM):
            tx += 1
            paid = work[start:start + PER_CLAIM]
            claims[tx.to_bytes(32, "big")] = [WorkId(w).text for w in paid]
            indexer._apply("ComputePool", 0, RewardsClaimed("0xA", 8 * PER_CLAIM, paid, meta(tx, WORKS + tx)))


def statuses(store: Store) -> dict[str, int]:
    return {r["status"]: r["n"] for r in store.select("SELECT status, COUNT(*) AS n FROM work_status GROUP BY status")}


def test_a_claim_marks_the_works_it_paid_through_an_index(tmp_path):
    store = Store(tmp_path / "index.db")
    indexed_history(store)
    assert statuses(store) == {"paid": WORKS - PER_CLAIM, "accepted": PER_CLAIM}
    assert store.scalar("SELECT COUNT(*) FROM claimed_works") == WORKS - PER_CLAIM
    plan = " | ".join(r["detail"] for r in store.select("EXPLAIN QUERY PLAN SELECT status FROM work_status"))
    assert "claimed_works" not in plan and "json_each" not in plan, plan  # the status is kept, not recomputed
    assert "SEARCH s USING COVERING INDEX sqlite_autoindex_events_1 (tx_hash=? AND log_index=?)" in plan, plan


def test_a_reorged_claim_takes_its_paid_works_with_it(tmp_path):
    store = Store(tmp_path / "index.db")
    indexed_history(store)
    claim = store.select("SELECT tx_hash, ordinal FROM events WHERE name = 'RewardsClaimed' LIMIT 1")[0]
    with store.transaction():
        assert store.remove_event("ComputePool", claim["tx_hash"], claim["ordinal"]) == 1
    assert statuses(store) == {"paid": WORKS - 2 * PER_CLAIM, "accepted": 2 * PER_CLAIM}
    assert store.scalar("SELECT COUNT(*) FROM claimed_works WHERE tx_hash = ?", (claim["tx_hash"],)) == 0


def test_an_index_of_the_old_schema_is_rebuilt_without_its_view(tmp_path):
    path = tmp_path / "index.db"
    old = Store(path)
    old.db.execute("DROP TABLE claimed_works")
    old.db.execute("CREATE VIEW claimed_works AS SELECT 1 AS work_id, 2 AS tx_hash")
    old.db.execute("PRAGMA user_version = 2")
    old.close()
    store = Store(path)
    assert store.scalar("SELECT type FROM sqlite_master WHERE name = 'claimed_works'") == "table"
    indexed_history(store)
    assert statuses(store)["paid"] == WORKS - PER_CLAIM
