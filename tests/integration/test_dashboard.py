"""The pool explorer against a real anvil + Kubo: the API a person reads, a reorg, an RPC outage."""

from __future__ import annotations

import dataclasses
import json
import math
import socket
import subprocess
import sys
import threading
import time

import requests
import torch

from dashboard.app import create_app
from dashboard.evidence import NO_EXPONENT_MATCHED, _toploc_rows, explain
from dashboard.indexer import ChainIndexer, ObjectFetcher
from dashboard.models import EvidenceExplanation
from dashboard.service import ExplorerService, free_port
from dashboard.store import Store
from ledger_client.ipfs.checkpoints import publish_checkpoint
from inference.verify import VerifyConfig, _toploc_check
from ledger_client.ipfs.content import put_object
from proofs.toploc import ChunkCountTest, build_proofs, verify_proofs
from proofs.toploc_thresholds import MISSING_STAT, ChunkLimits, Thresholds
from protocol.digest import WorkId, digest_to_cid, hex_text
from protocol.runspec import SamplingSpec
from protocol.verdicts import Evidence, Reason
from tests.support.explorer_answers import check_answers, json_routes
from tests.support.paths import ROOT
from trainer.publish import metrics_bytes


def _submit(chain, n: int, tag: int) -> bytes:
    step = chain.owner.pool.get_pool(chain.pool_id).latest_step
    return chain.submit(n, bytes([tag]) * 32, 8, step)  # the work id


def _challenge(chain, kubo, work_id: bytes, worker: str) -> bytes:
    evidence = Evidence(work_id=WorkId(work_id).text, pool_id=chain.pool_id, worker=worker, reason="REWARD",
                        reason_code=int(Reason.REWARD), message="sample 3: reported reward 1.0, verifier says 0.0",
                        failing_samples=[3], statistics={"reported": 1.0, "recomputed": 0.0},
                        validator=chain.validator.address)
    digest = put_object(kubo, evidence.model_dump_json().encode())
    chain.validator.pool.challenge(work_id, int(Reason.REWARD), digest)
    return digest


def _publish_with_metrics(chain, kubo, step: int, reward: float) -> None:
    metrics = {"step": step, "reward": reward, "accuracy": reward / 2, "clipped_fraction": 0.1, "staleness_mean": 0.5}
    cid = digest_to_cid(put_object(kubo, metrics_bytes(metrics)))
    published = publish_checkpoint(kubo, {"w": torch.full((4,), float(step))}, step=step, metrics=cid)
    chain.trainer.pool.publish_checkpoint(chain.pool_id, step, published.digest)


def _index_fully(store: Store, chain, kubo=None) -> ChainIndexer:
    indexer = ChainIndexer(store, chain.w3, chain.deployment)
    indexer.poll_once()
    if kubo is not None:
        fetcher = ObjectFetcher(store, kubo, timeout_s=1.0)
        while fetcher.fetch_due():
            pass
    return indexer


def _wait(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_api_shows_pools_submissions_verdicts_evidence_and_the_curve(chain, kubo, kubo_node, tmp_path):
    accepted = _submit(chain, 0, 0xA1)
    challenged = _submit(chain, 1, 0xB2)
    chain.validator.pool.attest(accepted)
    evidence = _challenge(chain, kubo, challenged, chain.accounts[5].address)
    for step, reward in ((1, 0.2), (2, 0.5)):
        _publish_with_metrics(chain, kubo, step, reward)

    service = ExplorerService(tmp_path / "index.sqlite", chain.anvil.rpc_url, chain.deployment, kubo_node.api_multiaddr,
                              port=free_port())
    url = service.start()
    try:
        get = lambda path: requests.get(url + path, timeout=10)  # noqa: E731
        _wait(lambda: len(get(f"/api/pools/{chain.pool_id}/curve").json().get("items", [])) == 2)

        pools = get("/api/pools").json()
        assert [p["pool_id"] for p in pools["items"]] == [chain.pool_id] and pools["total"] == 1
        pool = get(f"/api/pools/{chain.pool_id}").json()
        assert pool["submissions"] | {} == {"pending": 0, "accepted": 1, "rejected": 1, "paid": 0, "expired": 0}
        assert pool["state"]["reserved"] == str(8 * chain.config.reward_per_sample)  # live from the chain
        assert pool["validators"] == [chain.validator.address]

        subs = get(f"/api/pools/{chain.pool_id}/submissions?limit=1").json()
        assert subs["total"] == 2 and len(subs["items"]) == 1
        rejected = get(f"/api/pools/{chain.pool_id}/submissions?status=rejected").json()["items"]
        assert [(w["work_id"], w["reason"]) for w in rejected] == [(WorkId(challenged).text, "REWARD")]

        work = get(f"/api/works/{WorkId(challenged).text}").json()
        assert work["evidence"]["digest"] == hex_text(evidence)
        assert work["evidence"]["document"]["failing_samples"] == [3]
        assert work["slashed"] == str(chain.config.slash_amount)
        slashes = get(f"/api/pools/{chain.pool_id}/slashes").json()["items"]
        assert [(s["worker"], s["amount"]) for s in slashes] == [(chain.accounts[5].address, str(chain.config.slash_amount))]

        curve = get(f"/api/pools/{chain.pool_id}/curve").json()["items"]
        assert [(p["step"], p["reward"], p["accuracy"]) for p in curve] == [(1, 0.2, 0.1), (2, 0.5, 0.25)]

        worker = get(f"/api/workers/{chain.accounts[4].address}").json()
        assert worker["submissions"]["accepted"] == 1
        assert worker["owed"] == str(8 * chain.config.reward_per_sample)
        # bonded is free stake only now; the pool minimum is allocated (locked for the ComputePool)
        assert (worker["stake"]["bonded"], worker["stake"]["allocated"]) == ("0", str(chain.config.min_stake))

        for path in (f"/api/pools/{chain.pool_id + 9}", f"/api/pools/{chain.pool_id + 9}/submissions",
                     "/api/workers/0x" + "12" * 20, "/api/works/0x" + "34" * 32):
            r = get(path)
            assert r.status_code == 404 and "unknown" in r.json()["error"], path
        assert get("/api/works/nope").status_code == 400
        assert get(f"/api/pools/{chain.pool_id}/submissions?limit=0").status_code == 422
        assert "proofswarm_explorer_submissions" in get("/metrics").text
        assert get("/docs").status_code == 200 and "/api/pools/{pool_id}" in get("/openapi.json").json()["paths"]
        status = get("/api/status").json()
        assert status["lag_blocks"] <= 1 and status["last_error"] is None

        # every answer is its route's model, field for field (a pool the court does not judge has no court answers)
        works = [WorkId(w).text for w in (accepted, challenged)]
        check_answers(service.app, url, {"pool_id": str(chain.pool_id), "digest": hex_text(evidence)}, paths={
            "/api/works/{work_id}": [f"/api/works/{w}" for w in works],
            "/api/works/{work_id}/timeline": [f"/api/works/{w}/timeline" for w in works],
            "/api/workers/{address}": [f"/api/workers/{chain.accounts[n].address}" for n in (4, 5)],
            "/api/workers/{address}/submissions": [f"/api/workers/{chain.accounts[4].address}/submissions"],
            "/api/cases/{work_id}": [f"/api/cases/{works[0]}"],
            "/api/validators/{address}": [f"/api/validators/{chain.validator.address}"],
            "/api/validators/{address}/verdicts": [f"/api/validators/{chain.validator.address}/verdicts"],
            "/api/validators/{address}/earnings": [f"/api/validators/{chain.validator.address}/earnings"],
        }, absent=frozenset({"/api/summary", "/api/pools/{pool_id}/court", "/api/pools/{pool_id}/cases",
                             "/api/pools/{pool_id}/court/validators", "/api/cases/{work_id}", "/api/validators/{address}",
                             "/api/validators/{address}/verdicts", "/api/validators/{address}/earnings"}))
    finally:
        service.stop()


OPEN_JSON = {("Pool", "run_spec"), ("EvidenceAnswer", "document"), ("EvidenceExplanation", "thresholds"),
             ("Measurement", "measured"), ("Measurement", "threshold")}
"""The answers' fields that hold anyone's JSON as it is (read from IPFS: a run spec, an evidence document and what
it states); /api/summary, the demo's own JSON, is one as a whole."""


def test_every_json_route_declares_its_answer():
    """Every /api route has a response model, a pydantic model (or a list of one), and /openapi.json describes each
    answer by it: no field is left untyped, and only the fields of OPEN_JSON (and the demo summary) are any JSON."""
    app = create_app(lambda: None)  # the routes and the schema need no index
    routes = json_routes(app)
    assert len(routes) == 26
    schema = app.openapi()
    components = schema["components"]["schemas"]
    for route in routes:
        assert route.response_model is not None, route.path
        answer = schema["paths"][route.path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        ref = answer["items"]["$ref"] if answer.get("type") == "array" else answer["$ref"]
        assert (ref == "#/components/schemas/JsonValue") == (route.path == "/api/summary"), route.path
        assert {"400", "404", "422"} <= set(schema["paths"][route.path]["get"]["responses"]), route.path
    open_fields = set()
    for name, component in components.items():
        for field, spec in component.get("properties", {}).items():
            assert {k: v for k, v in spec.items() if k not in ("title", "description")}, (name, field, "untyped")
            if spec.get("$ref") == "#/components/schemas/JsonValue":
                open_fields.add((name, field))
    assert open_fields == OPEN_JSON
    assert set(schema["paths"]) == {r.path for r in routes}, "the page, /metrics and deep links stay out of the schema"


def test_index_after_a_reorg_equals_a_fresh_index(chain, tmp_path):
    live = Store(tmp_path / "live.sqlite")
    indexer = _index_fully(live, chain)
    receipts = [chain.worker(n % 2).pool.submit_work(chain.pool_id, 0, n // 2, bytes([0xC0 + n]) * 32, 8)
                for n in range(4)]
    chain.validator.pool.attest(chain.owner.pool.work_id_of(chain.pool_id, chain.worker(0).address, 0))
    indexer.poll_once()
    assert live.count_events()["WorkSubmitted"] == 4

    # Drop the last 3 blocks (two submissions and the attestation); re-include the third
    # submission in the new chain, where it lands in another block (same height, new hash).
    raw = chain.w3.eth.get_raw_transaction(receipts[2]["transactionHash"])
    assert "error" not in chain.rpc("anvil_reorg", [3, [[raw.to_0x_hex(), 0]]])
    chain.rpc("anvil_mine", [2])
    indexer.poll_once()

    assert live.count_events()["WorkSubmitted"] == 3
    moved = live.select("SELECT block_hash FROM events WHERE tx_hash = ?", (receipts[2]["transactionHash"].to_0x_hex(),))
    assert [r["block_hash"] for r in moved] != [receipts[2]["blockHash"].to_0x_hex()]  # followed to its new block
    assert "WorkAccepted" not in live.count_events()  # the attestation left with its block
    fresh = Store(tmp_path / "fresh.sqlite")
    _index_fully(fresh, chain)
    assert live.all_events() == fresh.all_events()


class Outage:
    """A TCP proxy in front of the RPC that can be cut and restored (on the same port)."""

    def __init__(self, target: str):
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.port = free_port()
        self.conns: list[socket.socket] = []
        self.listener: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(16)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def down(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept(); close() alone does not
        except OSError:
            pass
        self.listener.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self.conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_indexer_survives_an_rpc_outage_without_duplicate_rows(chain, tmp_path):
    from dashboard.chain_source import connect

    proxy = Outage(chain.anvil.rpc_url)
    proxy.up()
    store = Store(tmp_path / "index.sqlite")
    indexer = ChainIndexer(Store(tmp_path / "index.sqlite"), connect(proxy.url, 31337, timeout=2.0), chain.deployment)
    stop = threading.Event()
    runner = threading.Thread(target=indexer.run, args=(stop, 0.1), daemon=True)
    runner.start()
    try:
        _submit(chain, 0, 0xD1)
        _wait(lambda: store.count_events().get("WorkSubmitted") == 1)
        proxy.down()
        for tag in (0xD2, 0xD3):
            _submit(chain, 1, tag)  # straight to anvil while the explorer's RPC is cut
        _wait(lambda: indexer.errors > 0)
        assert indexer.last_error is not None
        proxy.up()
        _wait(lambda: store.count_events().get("WorkSubmitted") == 3 and indexer.last_error is None)
    finally:
        stop.set()
        runner.join(timeout=30)
        proxy.down()

    # A batch delivered again (as after a crash before the cursor was saved) lands on the same rows.
    before = store.all_events()
    with store.transaction():
        for name in indexer.cursors:
            state = store.get_meta(f"cursor:{name}")
            store.set_meta(f"cursor:{name}", state | {"next_block": chain.deployment.block, "delivered": {}})
    ChainIndexer(store, chain.w3, chain.deployment).poll_once()
    assert store.all_events() == before
    fresh = Store(tmp_path / "fresh.sqlite")
    _index_fully(fresh, chain)
    assert store.all_events() == fresh.all_events()


def test_explorer_cli_refuses_bad_input_with_one_line(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dashboard.cli", "start", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)

    bad_port = run("--port", "70000", "--rpc-url", "http://127.0.0.1:1", "--deployments", str(tmp_path / "d.json"))
    assert bad_port.returncode == 2 and bad_port.stderr.strip() == (
        "error: explorer start: argument --port: '70000' is out of range: a whole number from 1 to 65535 "
        "(see `explorer start --help`)")
    unreachable = run("--rpc-url", f"http://127.0.0.1:{free_port()}", "--deployments", str(tmp_path / "d.json"))
    assert unreachable.returncode == 1
    assert unreachable.stderr.strip().startswith("error: cannot reach the Ethereum RPC")
    assert "Traceback" not in unreachable.stderr


def test_a_demo_summary_is_served_when_present(chain, tmp_path):
    summary = tmp_path / "summary.json"
    service = ExplorerService(tmp_path / "i.sqlite", chain.anvil.rpc_url, chain.deployment, None, port=free_port(),
                              summary_path=summary)
    url = service.start()
    try:
        assert requests.get(url + "/api/summary", timeout=10).status_code == 404
        summary.write_text(json.dumps({"accepted": 5, "rejected": 2}))
        assert requests.get(url + "/api/summary", timeout=10).json() == {"accepted": 5, "rejected": 2}
        assert "app.js" in requests.get(url + "/summary", timeout=10).text
    finally:
        service.stop()


def test_claims_are_listed_and_printed_urls_open_their_page(chain, tmp_path):
    """A pool's claims page after a real claim (it answered 500 once the first reward was claimed), and the demo's
    printed /pool/N opens the page at #/pool/N."""
    worker = chain.worker(0)
    work_id = chain.submit(0, b"\xc3" * 32, 8)
    chain.validator.pool.attest(work_id)
    chain.rpc("evm_increaseTime", [chain.config.reward_lock_s])
    chain.rpc("evm_mine", [])
    worker.pool.claim([work_id])
    service = ExplorerService(tmp_path / "i.sqlite", chain.anvil.rpc_url, chain.deployment, None, port=free_port())
    url = service.start()
    try:
        get = lambda path, **kw: requests.get(url + path, timeout=10, **kw)  # noqa: E731
        _wait(lambda: get(f"/api/pools/{chain.pool_id}/claims").json().get("total") == 1)
        (claim,) = get(f"/api/pools/{chain.pool_id}/claims").json()["items"]
        assert (claim["worker"], claim["amount"], claim["works"]) == (
            worker.address, str(8 * chain.config.reward_per_sample), 1)
        assert claim["work_ids"] == [WorkId(work_id).text]
        assert get(f"/api/pools/{chain.pool_id}").json()["submissions"]["paid"] == 1
        for path in (f"/pool/{chain.pool_id}", f"/worker/{worker.address}", f"/work/{WorkId(work_id).text}"):
            moved = get(path, allow_redirects=False)
            assert moved.status_code == 307 and moved.headers["location"] == "/#" + path
            assert "app.js" in get(path).text
    finally:
        service.stop()


def test_an_index_of_an_older_schema_is_rebuilt_and_its_ipfs_cache_kept(tmp_path):
    """An index written before the court's columns existed (schema 1) is dropped on open and re-indexed from the
    chain by the next poll; the IPFS cache (content-addressed, never stale) stays."""
    import sqlite3

    from dashboard.store import SCHEMA_VERSION

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                     "CREATE TABLE events (tx_hash TEXT, log_index INTEGER, contract TEXT, ordinal INTEGER, name TEXT,"
                     " block_number INTEGER, block_hash TEXT, pool_id INTEGER, work_id TEXT, worker TEXT, data TEXT);"
                     "INSERT INTO meta VALUES ('tip', '[5, \"0x00\"]');"
                     "CREATE TABLE objects (digest TEXT PRIMARY KEY, kind TEXT NOT NULL, body TEXT, error TEXT,"
                     " attempts INTEGER NOT NULL DEFAULT 0, retry_after REAL NOT NULL DEFAULT 0);"
                     "INSERT INTO objects (digest, kind, body) VALUES ('0x01', 'evidence', '{\"a\": 1}');")
    db.commit()
    db.close()
    store = Store(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.get_meta("tip") is None and store.all_events() == []
    assert {r[1] for r in store.db.execute("PRAGMA table_info(events)")} >= {"block_time", "party"}
    assert store.object("0x01").body == {"a": 1}
    Store(path)  # opening the current schema again changes nothing
    assert store.object("0x01").body == {"a": 1}


def test_a_calibrated_pools_toploc_failure_shows_the_limits_of_the_chunks_length():
    """In a pool whose TOPLOC limits are calibrated per chunk length, the explorer shows each failing chunk against
    the limits it was judged by (a 1-token last chunk's, not the full chunk's), from the validator's own details."""
    torch.manual_seed(0)
    hidden = torch.randn(33, 64)  # a full 32-token chunk and a 1-token last chunk
    proofs = build_proofs(hidden, 32, 128)
    tampered = hidden.clone()
    tampered[32] = torch.randn(64)  # the last chunk's hidden state is another model's
    limits = (ChunkLimits(tokens=1, max_exp_mismatches=60, max_mant_err_mean=3.0, max_mant_err_median=2.0),
              ChunkLimits(tokens=32, max_exp_mismatches=20, max_mant_err_mean=1.0, max_mant_err_median=0.5))
    config = VerifyConfig(sampling=SamplingSpec(), thresholds=Thresholds(by_tokens=limits))
    check = _toploc_check(verify_proofs(tampered, proofs, 32, 128), config)
    assert not check.passed and check.details["failing_chunks"] == [1]
    rows = {r.what: r for r in _toploc_rows(check.details, {}, completion=3)}
    assert rows["exponent mismatches"].threshold == 60 and "≤ 1 tokens" in rows["exponent mismatches"].rule
    assert rows["mantissa error, mean"].threshold == 3.0 and rows["mantissa error, median"].threshold == 2.0
    assert not all(r.passes for r in rows.values()) and {r.chunk for r in rows.values()} == {1}


def test_a_chunk_with_no_matching_exponent_reads_as_such_not_as_two_to_the_64():
    """Issue 47, finding 12: the proof's sentinel for "no exponent matched" (2^64) was shown as a measured mantissa
    error of 18446744073709551616."""
    torch.manual_seed(1)
    hidden = torch.randn(32, 64)
    proofs = build_proofs(hidden, 32, 128)
    check = _toploc_check(verify_proofs(hidden * 1e6, proofs, 32, 128), VerifyConfig(sampling=SamplingSpec()))
    assert not check.passed and MISSING_STAT in check.details["mant_err_mean"]
    rows = {r.what: r for r in _toploc_rows(check.details, {}, completion=0)}
    for what in ("mantissa error, mean", "mantissa error, median"):
        assert rows[what].measured == NO_EXPONENT_MATCHED and rows[what].passes is False


def test_a_chunk_count_challenge_shows_the_count_against_an_honest_files():
    """A TOPLOC challenge by the file's chunk-count test (no chunk outside its own limits) shows how many chunks
    were above their length's honest level, what an honest file averages, and the bound against the rate."""
    test = ChunkCountTest(passed=False, chunks=64, exceeding=60, expected=16.9, log_p_value=-40.0,
                          false_positive_rate=1e-6)
    doc = {"reason_code": int(Reason.TOPLOC), "reason": "TOPLOC", "message": "60 of 64 checked chunks exceed …",
           "statistics": {"chunk_count_test": dataclasses.asdict(test)}}
    explained = explain(doc)
    assert isinstance(explained, EvidenceExplanation)
    rows = explained.measurements
    assert [(r.measured, r.threshold) for r in rows] == [(60, 16.9), (math.exp(-40.0), 1e-6)]
    assert rows[1].passes is False


def test_a_hostile_evidence_document_is_explained_with_only_what_fits():
    """An evidence document is anyone's JSON: the explanation takes from it only values of its fields' kinds, a
    document whose measurements cannot be read explains without them, and a q = 1 draw claiming 10¹² completions is
    judged without building their list."""
    doc = {"reason_code": 12, "validator": 7, "message": ["x"], "failing_samples": [1, True, "x", 2],
           "failing_chunks": [1], "statistics": [1], "thresholds": {"a": 1},
           "spot_check": {"spot_check_bps": 10_000, "n": 10**12, "indices": [0, "1"]}}
    x = explain(doc, "0x" + "ab" * 32)
    assert isinstance(x, EvidenceExplanation) and (x.reason, x.check) == ("TOPLOC", "TOPLOC")
    assert (x.validator, x.summary, x.measurements) == (None, x.meaning, [])
    assert [(c.completion, c.chunks) for c in x.failing_completions] == [(1, []), (2, [])]
    assert x.spot_check is not None and (x.spot_check.indices, x.spot_check.verified) == (None, False)
    assert explain([1, 2]).kind == "unreadable" and explain({"finding": "ok", "validator": 7}).validator is None


def test_a_toploc_challenge_of_128_completions_reads_as_counts_and_the_worst_few():
    """Issue 47, finding 12: 128 failing completions were one paragraph. The explanation counts them (of the file's
    n, of the m checked), their failing chunks and the measured values that fail, and names the worst few (the
    most failing chunks first); the page shows those in a table and the rest behind a click."""
    failing = list(range(128))
    chunks = {str(i): list(range(1 + i % 4)) if i not in (17, 90) else list(range(8)) for i in failing}
    details = {"failing_chunks": [0], "exp_mismatches": [128], "mant_err_mean": [MISSING_STAT],
               "mant_err_median": [MISSING_STAT],
               "thresholds": {"min_exp_matches": 90, "per_points": 128, "max_mant_err_mean": 10.0,
                              "max_mant_err_median": 8.0}}
    doc = {"reason_code": int(Reason.TOPLOC), "reason": "TOPLOC", "message": "128 of 256 completions fail toploc",
           "failing_samples": failing, "failing_chunks": chunks, "statistics": {"first_failure": details},
           "spot_check": {"spot_check_bps": 5_000, "n": 256, "m": 128, "indices": failing}}
    x = explain(doc)
    assert isinstance(x, EvidenceExplanation)
    s = x.failing_summary
    assert (s.completions, s.of, s.checked) == (128, 256, 128)
    assert s.chunks == sum(len(c) for c in chunks.values())
    assert {b.what: b.failing for b in s.by_check} == {
        "exponent matches": 1, "mantissa error, mean": 1, "mantissa error, median": 1}
    assert s.worst == [17, 90, 3]  # 8 chunks each, then the lowest of those with 4
    assert len(x.failing_completions) == 128  # every one still there, for the page's "the other 125"
