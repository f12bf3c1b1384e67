"""bench.explorer_scale at a small N: its synthetic history goes through the indexer's own ingestion
(`ChainIndexer._apply`, `Store.link_court_rows`), every route it times answers, and what the index keeps by triggers
(dashboard/store.py, schema 5: counts, sample and amount sums, latency histograms, slashes by pool, the pools a claim
paid, verdicts by block, a court validator's verdicts by outcome) equals what the events say, also after a reorg removes rows."""

from __future__ import annotations

from fastapi.testclient import TestClient

from bench import explorer_scale
from dashboard.app import ThreadLocalExplorer, create_app
from dashboard.store import AMOUNT, CASE_STATE, FIRST_AT, FIRST_VERDICT, HAS, WORK_STATUS, Store
from dashboard.views import Explorer

FILES, WORKERS = 1_000, 20


def recomputed(store: Store) -> dict[str, dict]:
    """What the triggers keep, computed from the event rows alone (amounts added up here: uint256)."""
    works = store.select(f"""SELECT s.pool_id, s.worker, {WORK_STATUS.format(w='s.work_id')} AS status,
                                    coalesce({CASE_STATE.format(w='s.work_id', pool='s.pool_id')}, '') AS state,
                                    json_extract(s.data, '$.n_samples') AS samples, s.work_id, s.block_time,
                                    {FIRST_AT.format(w='s.work_id', pool='s.pool_id', names="'VerdictGiven'")} AS given,
                                    {FIRST_AT.format(w='s.work_id', pool='s.pool_id',
                                                     names="'WorkAccepted', 'WorkChallenged'")} AS decided,
                                    {FIRST_VERDICT.format(what='v.party', w='s.work_id', pool='s.pool_id')} AS judge,
                                    {FIRST_VERDICT.format(what="json_extract(v.data, '$.accepted')", w='s.work_id',
                                                          pool='s.pool_id')} AS accepted,
                                    {HAS.format(w='s.work_id', names="'VerdictFinal', 'CaseVoided'", also='')} AS ended,
                                    {HAS.format(w='s.work_id', names="'Disputed'", also=' AND v.pool_id = s.pool_id')}
                                      AS disputed,
                                    {HAS.format(w='s.work_id', names="'DisputeResolved'", also='')} AS resolved
                             FROM events s WHERE s.name = 'WorkSubmitted'""")
    out: dict[str, dict] = {"work_counts": {}, "latencies": {}, "event_counts": {}, "slash_sums": {}, "claim_pools": {},
                            "verdict_blocks": {}, "judge_counts": {}}
    def add(table: str, key: tuple, *values: int) -> None:
        old = out[table].get(key, (0,) * len(values))
        out[table][key] = tuple(a + b for a, b in zip(old, values, strict=True))
    for w in works:
        add("work_counts", (w["pool_id"], w["worker"], w["status"], w["state"]), 1, w["samples"])
        if w["judge"] is not None:
            add("judge_counts", (w["pool_id"], w["judge"], w["accepted"] or 0, w["ended"], w["disputed"],
                                 w["resolved"]), 1)
        for kind in ("given", "decided"):
            if w[kind] is not None:
                add("latencies", (w["pool_id"], kind, w[kind] - w["block_time"]), 1)
    for e in store.select(f"SELECT name, coalesce(pool_id, -1) AS pool, coalesce(party, '') AS party, "
                          f"{AMOUNT.format(row='events')} AS amount FROM events"):
        add("event_counts", (e["name"], e["pool"], e["party"]), 1, int(e["amount"]))
    for v in store.select("SELECT pool_id, name, block_number FROM events WHERE name IN ('WorkAccepted', "
                          "'WorkChallenged') AND pool_id IS NOT NULL"):
        add("verdict_blocks", (v["pool_id"], v["name"], v["block_number"]), 1)
    for s in store.select("SELECT c.pool_id, s.worker, lower(json_extract(s.data, '$.slasher')) AS slasher, "
                          "json_extract(s.data, '$.amount') AS amount FROM events s JOIN events c "
                          "ON c.tx_hash = s.tx_hash AND c.name = 'WorkChallenged' AND c.pool_id IS NOT NULL "
                          "WHERE s.name = 'Slashed'"):
        add("slash_sums", (s["pool_id"], s["worker"], s["slasher"]), 1, int(s["amount"]))
    for c in store.select("SELECT c.tx_hash, w.pool_id FROM claimed_works c JOIN events w ON w.work_id = c.work_id "
                          "AND w.name = 'WorkSubmitted'"):
        add("claim_pools", (c["tx_hash"], c["pool_id"]), 1)
    return out


def kept(store: Store) -> dict[str, dict]:
    """The tables the triggers keep, rows of 0 left out."""
    def rows(sql: str, key: tuple[str, ...], values: tuple[str, ...]) -> dict[tuple, tuple]:
        return {tuple(r[k] for k in key): tuple(int(r[v]) for v in values) for r in store.select(sql)}
    return {"work_counts": rows("SELECT * FROM work_counts WHERE n != 0", ("pool_id", "worker", "status", "state"),
                                ("n", "samples")),
            "latencies": rows("SELECT * FROM latencies WHERE n != 0", ("pool_id", "kind", "seconds"), ("n",)),
            "event_counts": rows("SELECT * FROM event_counts WHERE n != 0", ("name", "pool_id", "party"),
                                 ("n", "amount")),
            "slash_sums": rows("SELECT * FROM slash_sums WHERE n != 0", ("pool_id", "worker", "slasher"),
                               ("n", "amount")),
            "claim_pools": rows("SELECT * FROM claim_pools WHERE n != 0", ("tx_hash", "pool_id"), ("n",)),
            "verdict_blocks": rows("SELECT * FROM verdict_blocks WHERE n != 0", ("pool_id", "name", "block_number"),
                                   ("n",)),
            "judge_counts": rows("SELECT * FROM judge_counts WHERE n != 0",
                                 ("pool_id", "judge", "accepted", "ended", "disputed", "resolved"), ("n",))}


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
    before = kept(store)
    assert all(before.values())  # every table holds rows for the reorg to change
    gone = store.select("SELECT contract, tx_hash, ordinal FROM (SELECT *, row_number() OVER (PARTITION BY name "
                        "ORDER BY rowid DESC) AS newest FROM events WHERE name IN ('WorkAccepted', 'RewardsClaimed', "
                        "'VerdictFinal', 'WorkSubmitted', 'Slashed', 'WorkChallenged', 'VerdictGiven')) WHERE newest <= 15")
    with store.transaction():
        for r in gone:
            store.remove_event(r["contract"], r["tx_hash"], r["ordinal"])
    after = kept(store)
    assert after == recomputed(store)
    assert [table for table in after if after[table] == before[table]] == []  # the reorg changed every table
    assert sum(store.count_events().values()) == store.scalar("SELECT COUNT(*) FROM events")
