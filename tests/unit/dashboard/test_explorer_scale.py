"""bench.explorer_scale at a small N: its synthetic history goes through the indexer's own ingestion
(`ChainIndexer._apply`, `Store.link_court_rows`), every route it times answers, and the counts the index keeps by
triggers (dashboard/store.py, schema 4) equal what the events say, also after a reorg removes rows."""

from __future__ import annotations

from fastapi.testclient import TestClient

from bench import explorer_scale
from dashboard.app import ThreadLocalExplorer, create_app
from dashboard.store import CASE_STATE, WORK_STATUS, Store
from dashboard.views import Explorer

FILES, WORKERS = 1_000, 20


def recomputed(store: Store) -> dict[tuple, int]:
    """Submissions by (pool, worker, status, case state) computed from the event rows alone."""
    rows = store.select(f"""SELECT s.pool_id, s.worker, {WORK_STATUS.format(w='s.work_id')} AS status,
                                   coalesce({CASE_STATE.format(w='s.work_id', pool='s.pool_id')}, '') AS state,
                                   COUNT(*) AS n
                            FROM events s WHERE s.name = 'WorkSubmitted' GROUP BY 1, 2, 3, 4""")
    return {(r["pool_id"], r["worker"], r["status"], r["state"]): r["n"] for r in rows}


def kept(store: Store) -> dict[tuple, int]:
    return {(r["pool_id"], r["worker"], r["status"], r["state"]): r["n"]
            for r in store.select("SELECT * FROM work_counts WHERE n != 0")}


def test_the_history_goes_through_the_indexer_and_every_route_answers(tmp_path):
    db = tmp_path / "index.db"
    store = Store(db)
    ids = explorer_scale.synthetic_history(store, FILES, WORKERS)
    counts = store.count_events()
    assert sum(counts.values()) == ids["events"] == store.scalar("SELECT COUNT(*) FROM events")
    assert counts["WorkSubmitted"] == FILES
    assert store.scalar("SELECT COUNT(*) FROM claimed_works") > 0  # written by upsert_event from each claim
    assert store.scalar("SELECT COUNT(*) FROM objects WHERE kind = 'evidence'") == 1  # asked for by _apply
    statuses = {r["status"] for r in store.select("SELECT DISTINCT status FROM works")}
    assert statuses == {"pending", "accepted", "rejected", "paid"}
    assert {r["state"] for r in store.select("SELECT DISTINCT state FROM works WHERE pool_id = 2")} == \
        {"pending", "final"}
    assert kept(store) == recomputed(store)
    store.close()

    summary = tmp_path / "summary.json"
    summary.write_text("{}")
    live = explorer_scale.StandInChain()
    app = create_app(ThreadLocalExplorer(lambda: Explorer(Store(db), live)), summary_path=summary)  # type: ignore[arg-type]
    with TestClient(app) as client:
        timed = explorer_scale.time_routes(client, explorer_scale.routes(ids), reps=1)
    redirects = {"/pool/1"}
    assert {path: r["status"] for path, r in timed.items() if r["status"] != (307 if path in redirects else 200)} \
        == {}
    assert set(timed) >= {"/metrics", "/api/pools/1/submissions", "/api/pools/2/cases", f"/api/cases/{ids['case']}"}


def test_the_kept_counts_follow_a_reorg(tmp_path):
    store = Store(tmp_path / "index.db")
    explorer_scale.synthetic_history(store, FILES, WORKERS)
    gone = store.select("SELECT contract, tx_hash, ordinal FROM events WHERE name IN "
                        "('WorkAccepted', 'RewardsClaimed', 'VerdictFinal', 'WorkSubmitted') ORDER BY rowid DESC LIMIT 40")
    with store.transaction():
        for r in gone:
            store.remove_event(r["contract"], r["tx_hash"], r["ordinal"])
    assert kept(store) == recomputed(store)
    assert sum(store.count_events().values()) == store.scalar("SELECT COUNT(*) FROM events")
