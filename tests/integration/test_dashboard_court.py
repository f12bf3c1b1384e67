"""The explorer over a real court run (anvil + Kubo, tests/support/court_scenario.py): every number its API shows about
the court, a validator, a worker, a case and a pool is compared with the chain (getters and the contracts' own
logs, read with web3, not through the index); the reason for each verdict comes back readable; the daemons' CLIs
tell their operators the same (`validator status | deregister | withdraw`, `worker status`, the worker daemon's
challenges, re-stake cap and metrics); and the index after a depth-3 reorg with court events in it equals a fresh
re-index."""

from __future__ import annotations

import json
import time

import pytest
import requests
from eth_utils import keccak
from prometheus_client import generate_latest
from rich.console import Console

from dashboard.evidence import NO_EXPONENT_MATCHED
from dashboard.indexer import ChainIndexer
from dashboard.service import ExplorerService, free_port
from dashboard.store import Store
from ledger_client.chain.ledger import save_deployment
from protocol.digest import WorkId, digest_to_cid, hex_text
from protocol.pool import CaseState, WorkStatus
from protocol.spotcheck import spot_check_indices, spot_check_randomness
from tests.support.court_scenario import COURT, N, WORKER, CourtRun
from tests.support.explorer_answers import check_answers
from validator.cli import main as validator_main
from worker.cli import main as worker_main
from worker.daemon import RestakeCapReached, WorkerDaemon, WorkerOptions, status_table

REVEALED = {(1).to_bytes(32, "big"): "valid", (2).to_bytes(32, "big"): "invalid"}


@pytest.fixture(scope="module")
def run(tmp_path_factory, kubo_node):
    r = CourtRun.build(tmp_path_factory.mktemp("explorer-court"), kubo_node.api_multiaddr)
    yield r
    r.close()


@pytest.fixture(scope="module")
def api(run, tmp_path_factory):
    service = ExplorerService(tmp_path_factory.mktemp("explorer-index") / "index.sqlite", run.anvil.rpc_url,
                              run.deployment, run.kubo_api, port=free_port(), poll_s=0.2)
    url = service.start()

    def get(path: str, **kw):
        r = requests.get(url + path, timeout=10, **kw)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        return r.json()

    deadline = time.monotonic() + 600  # a bound, not a pace: the index catches up in seconds alone, minutes under load
    wid = WorkId(run.works["toploc"]).text
    while (requests.get(f"{url}/api/status", timeout=10).json().get("indexed_block") != run.w3.eth.block_number
           or requests.get(f"{url}/api/works/{wid}", timeout=10).json().get("explanation") is None):
        assert time.monotonic() < deadline, "the explorer did not catch up with the court run"
        time.sleep(0.2)
    get.url = url
    get.app = service.app
    yield get
    service.stop()


def _logs(run, contract: str, event: str) -> list[dict]:
    c = {"court": run.ledger(0).court, "pool": run.ledger(0).pool, "stake": run.ledger(0).stake}[contract]
    return [dict(e["args"]) | {"tx": e["transactionHash"].to_0x_hex(), "block": e["blockNumber"]}
            for e in getattr(c.contract.events, event).get_logs(from_block=0)]


def test_the_court_of_a_pool_matches_the_chain(run, api):
    court = run.ledger(0).court
    c = api(f"/api/pools/{run.pool_id}/court")
    params = court.get_params(run.pool_id)
    assert c["params"] == {k: str(v) if isinstance(v, int) and v > 2**53 else v for k, v in params._asdict().items()}
    assert c["fee_budget"] == str(court.fee_budget(run.pool_id))
    assert c["fees_paid"] == str(sum(e["fee"] for e in _logs(run, "court", "VerdictFinal")))
    assert c["penalties_total"] == str(sum(e["amount"] for e in _logs(run, "court", "ValidatorPenalized")))
    assert c["disputes"] | {} == {"total": 1, "open": 0, "overturned": 1, "upheld": 0, "void": 0}
    assert c["validators"] == {"registered": 4, "ever": 5}
    names = {CaseState.FINAL: "final", CaseState.VOID: "void"}
    states = {WorkId(w).text: names[CaseState(court.cases(w).state)] for w in run.works.values()}
    cases = api(f"/api/pools/{run.pool_id}/cases")
    assert {x["work_id"]: x["state"] for x in cases["items"]} == states and cases["total"] == 5
    assert [x["work_id"] for x in api(f"/api/pools/{run.pool_id}/cases?state=void")["items"]] == [
        WorkId(run.works["lapsed"]).text]
    r = requests.get(f"{api.url}/api/pools/{run.pool_id}/cases?state=nope", timeout=10)
    assert r.status_code == 422


def test_every_validator_s_numbers_match_the_chain(run, api):
    court, stake = run.ledger(0).court, run.ledger(0).stake
    penalized = _logs(run, "court", "ValidatorPenalized")
    credited = _logs(run, "court", "Credited")
    verdicts = _logs(run, "court", "VerdictGiven")
    listed = api(f"/api/pools/{run.pool_id}/court/validators")
    assert sorted(v["validator"] for v in listed["items"]) == sorted(run.validators)
    for address in run.validators:
        page = api(f"/api/validators/{address}")
        (mine,) = page["pools"]
        chain = court.get_validator(run.pool_id, address)
        assert (mine["live"]["locked"], mine["live"]["reserved"]) == (str(chain.locked), str(chain.reserved))
        assert mine["locked_from_events"] == str(chain.locked), "the events add up to the locked stake"
        assert mine["reserved_by_open_cases"]["total"] == str(chain.reserved) == "0"
        assert page["account"] == {"credits": str(court.credits(address)), "bonded": str(stake.bonded_of(address)),
                                   "court_locked": str(stake.locked_of(court.address, address))}
        assert mine["penalties_total"] == str(sum(e["amount"] for e in penalized if e["party"] == address))
        assert mine["earned_total"] == str(sum(e["amount"] for e in credited if e["to"] == address))
        assert mine["verdicts"]["given"] == sum(e["judge"] == address for e in verdicts)
        earned = api(f"/api/validators/{address}/earnings")
        assert earned["net"] == str(int(mine["earned_total"]) - int(mine["penalties_total"]))
        assert [p["block"] for p in earned["points"]] == sorted(p["block"] for p in earned["points"])

    attest_all = api(f"/api/validators/{run.judges['overturn']}")["pools"][0]
    assert attest_all["verdicts"]["overturned"] == 1
    assert int(attest_all["penalties"]["wrong verdict"]) == COURT.wrong_verdict_slash
    mine = api(f"/api/validators/{run.judges['overturn']}/verdicts")["items"]
    overturned = next(v for v in mine if v["work_id"] == WorkId(run.works["overturn"]).text)
    assert (overturned["verdict"], overturned["overturned"], overturned["disputer"], overturned["lost"]) == (
        "accepted", True, run.disputer, str(COURT.wrong_verdict_slash))
    disputer = api(f"/api/validators/{run.disputer}")["pools"][0]
    assert disputer["disputes"] == {"filed": 1, "won": 1, "lost": 0, "void": 0, "open": 0}
    minority = api(f"/api/validators/{run.minority}")["pools"][0]
    assert minority["committee"] | {} == {"seats": 1, "committed": 1, "revealed": 1, "missed": 0, "with_majority": 0,
                                         "with_minority": 1}
    assert minority["penalties"]["voted with the minority"] == str(COURT.non_voter_penalty)
    standin = api(f"/api/validators/{run.standin}")["pools"][0]
    assert int(standin["earned"]["stand-in"]) == COURT.silence_penalty
    leaver = api(f"/api/validators/{run.leaver}")
    (bond,) = [e for e in _logs(run, "court", "BondWithdrawn") if e["validator"] == run.leaver]
    assert leaver["pools"][0]["registered"] is False and leaver["pools"][0]["bond_withdrawn"]["amount"] == str(
        bond["amount"])
    assert leaver["withdrawn_total"] == str(sum(e["amount"] for e in _logs(run, "court", "Withdrawn")
                                                if e["to"] == run.leaver)) != "0"
    r = requests.get(f"{api.url}/api/validators/0x{'12' * 20}", timeout=10)
    assert r.status_code == 404 and "unknown validator" in r.json()["error"]


def test_a_case_shows_its_committee_votes_seed_and_who_paid_what(run, api):
    court = run.ledger(0).court
    wid = run.works["overturn"]
    case = api(f"/api/cases/{WorkId(wid).text}")
    assert case["first_verdict"]["judge"] == run.judges["overturn"] and case["first_verdict"]["accepted"] is True
    (dispute,) = case["disputes"]
    (committee,) = dispute["committees"]
    assert committee["members"] == list(court.committee_of(wid))
    (disputed,) = _logs(run, "court", "Disputed")
    seed_hash = bytes(run.w3.eth.get_block(disputed["block"] + 1)["hash"])
    assert committee["seed_inputs"]["seed_block_hash"] == hex_text(seed_hash)
    # ValidatorCourt.drawCommittee: seed = keccak256(abi.encode(blockhash(dispute block + 1), workId, round))
    assert committee["seed_inputs"]["seed"] == hex_text(keccak(seed_hash + wid + (0).to_bytes(32, "big")))
    assert {v["voter"]: v["vote"] for v in dispute["votes"]} == {m: REVEALED[court.votes(wid, m)]
                                                                 for m in committee["members"]}
    (resolved,) = _logs(run, "court", "DisputeResolved")
    assert dispute["resolved"]["votes_valid"] == resolved["votesValid"] == 1
    assert dispute["resolved"]["overturned"] is True
    in_tx = lambda e: e["tx"] == resolved["tx"]  # noqa: E731
    assert sorted((p["to"], p["amount"]) for p in case["payments"]) == sorted(
        (e["to"], str(e["amount"])) for e in _logs(run, "court", "Credited") if in_tx(e))
    assert sorted((p["party"], p["amount"]) for p in case["penalties"]) == sorted(
        (e["party"], str(e["amount"])) for e in _logs(run, "court", "ValidatorPenalized") if in_tx(e))
    (challenged,) = [e for e in _logs(run, "pool", "WorkChallenged") if e["workId"] == wid]
    assert case["worker_slashed"]["amount"] == str(challenged["slashed"])
    assert case["pool_verdict"]["reason"] == "DISPUTE" and case["outcome"]["owner"] == run.disputer
    work = api(f"/api/works/{WorkId(wid).text}")  # judged by the first verdict's judge, not the disputer that won
    assert work["judge"] == run.judges["overturn"] != run.disputer and work["reason"] == "DISPUTE"
    lapsed = api(f"/api/cases/0x{run.works['lapsed'].hex()}")
    assert lapsed["outcome"]["why"] == "nobody judged within the verdict window"
    assert lapsed["assignment"]["validator"] == run.judges["lapsed"]
    assert lapsed["penalties"][0]["why_code"] == 4 and lapsed["pool_verdict"]["event"] == "WorkExpired"
    standin = api(f"/api/cases/0x{run.works['standin'].hex()}")
    assert standin["first_verdict"]["stand_in"] is True
    assert standin["first_verdict"]["silent_assignee_penalty"] == str(COURT.silence_penalty)


def test_the_reason_for_every_verdict_is_readable(run, api):
    toploc = api(f"/api/works/0x{run.works['toploc'].hex()}")
    assert (toploc["status"], toploc["reason"], toploc["judge"]) == ("rejected", "TOPLOC", run.judges["toploc"])
    why = toploc["explanation"]
    failing = why["failing_completions"]
    assert why["check"] == "TOPLOC" and [c["chunks"] for c in failing] == [[1], [1], [0, 1], [0, 1]]
    rows = {r["what"]: r for r in why["measurements"]}
    assert (rows["exponent matches"]["measured"], rows["exponent matches"]["threshold"]) == (0, 90)
    assert rows["mantissa error, mean"]["passes"] is False and rows["mantissa error, mean"]["chunk"] == 1
    # the proof's sentinel for a chunk that matched no exponent reads as such, not as 2^64
    assert rows["mantissa error, mean"]["measured"] == rows["mantissa error, median"]["measured"] == NO_EXPONENT_MATCHED
    # at a glance: 4 of 8 (4 checked), 6 chunks, which measured values fail, the worst first
    summary = why["failing_summary"]
    assert (summary["completions"], summary["of"], summary["checked"], summary["chunks"]) == (4, N, 4, 6)
    assert {b["what"]: b["failing"] for b in summary["by_check"]} == {
        "exponent matches": 1, "mantissa error, mean": 1, "mantissa error, median": 1}
    assert summary["worst"] == [failing[2]["completion"], failing[3]["completion"], failing[0]["completion"]]
    block = next(e["block"] for e in _logs(run, "pool", "WorkSubmitted") if e["workId"] == run.works["toploc"])
    block_hash = bytes(run.w3.eth.get_block(block + 1)["hash"])
    draw = spot_check_indices(spot_check_randomness(block_hash, run.works["toploc"]), N, 5_000)
    expected = {"q": 0.5, "n": N, "m": 4, "indices": draw, "verified": True, "block_hash": hex_text(block_hash),
                "seed_block": block + 1}
    assert {k: why["spot_check"][k] for k in expected} == expected
    assert sorted(draw) == [c["completion"] for c in failing]

    accepted = api(f"/api/works/0x{run.works['accepted'].hex()}")
    assert accepted["status"] == "paid" and accepted["explanation"] is None
    block = accepted["block"]
    block_hash = bytes(run.w3.eth.get_block(block + 1)["hash"])
    assert accepted["checks"]["indices"] == spot_check_indices(
        spot_check_randomness(block_hash, run.works["accepted"]), N, 5_000)
    assert "TOPLOC proofs" in accepted["checks"]["spot_checks"] and accepted["checks"]["m"] == 4

    overturned = api(f"/api/works/0x{run.works['overturn'].hex()}")
    assert overturned["reason"] == "DISPUTE" and overturned["evidence_digest"] == hex_text(run.evidence["overturn"])
    assert overturned["explanation"]["check"] == "reward"
    assert [c["completion"] for c in overturned["explanation"]["failing_completions"]] == [1, 4, 6]
    assert overturned["case"]["disputes"][0]["evidence"]["reason"] == "REWARD"
    events = [t["event"] for t in overturned["timeline"]]
    for name in ("WorkSubmitted", "VerdictGiven", "Disputed", "CommitteeDrawn", "VoteCommitted", "VoteRevealed",
                 "DisputeResolved", "ValidatorPenalized", "VerdictFinal", "WorkChallenged", "Slashed"):
        assert name in events, name
    assert events[0] == "WorkSubmitted" and events.index("Disputed") < events.index("DisputeResolved")
    paid = [t["event"] for t in api(f"/api/works/0x{run.works['accepted'].hex()}/timeline")]
    assert paid[0] == "WorkSubmitted" and paid[-1] == "RewardsClaimed"


def test_the_worker_s_page_matches_the_chain(run, api):
    pool, stake = run.ledger(0).pool, run.ledger(0).stake
    w = api(f"/api/workers/{run.worker}")
    assert w["stake"]["bonded"] == str(stake.bonded_of(run.worker))
    assert w["stake"]["allocated"] == str(stake.locked_of(pool.address, run.worker))
    member = pool.get_member(run.pool_id, run.worker)
    assert w["members"][str(run.pool_id)]["allocation"] == str(member.allocation)
    assert w["members"][str(run.pool_id)]["open_works"] == member.open_works == 0
    statuses = {k: 0 for k in ("pending", "accepted", "rejected", "paid", "expired")}
    for wid in run.works.values():
        statuses[WorkStatus(pool.get_work(wid).status).name.lower()] += 1
    assert w["submissions"] == statuses
    assert w["claimed"] == str(sum(e["amount"] for e in _logs(run, "pool", "RewardsClaimed")))
    assert (w["owed"], w["claimable"]) == ("0", "0")
    slashed = [e for e in _logs(run, "stake", "Slashed") if e["worker"] == run.worker]
    assert w["slashed"] == str(sum(e["amount"] for e in slashed))
    assert sorted(s["reason"] for s in w["slashes"]) == ["DISPUTE", "TOPLOC"]
    assert all(s["evidence_digest"] for s in w["slashes"])
    # the worker's stake withdrawal (StakeManager's Withdrawn, which the court's Withdrawn once shadowed)
    withdrawn = api("/api/status")
    assert withdrawn["last_error"] is None


def test_the_pool_owner_and_trainer_views(run, api):
    pool, court = run.ledger(0).pool, run.ledger(0).court
    s = api(f"/api/pools/{run.pool_id}/stats")
    chain = pool.get_pool(run.pool_id)
    assert (s["budget"], s["reserved"]) == (str(chain.budget), str(chain.reserved))
    assert s["fee_budget"] == str(court.fee_budget(run.pool_id))
    assert s["submissions"] == 5 and s["samples"] == 5 * N and s["accepted_samples"] == 2 * N
    assert s["adversary_rate"] == 0.5  # 2 rejected of 4 judged
    assert s["backlog"] == {"awaiting_verdict": 0, "awaiting_finality": 0}
    assert s["verdict_latency_s"]["n"] == 4 and s["finality_latency_s"]["n"] == 4
    assert 0 <= s["verdict_latency_s"]["p50"] <= s["verdict_latency_s"]["p99"] <= COURT.verdict_window_s
    assert s["finality_latency_s"]["p50"] > COURT.dispute_window_s
    assert s["slashed_total"] == str(sum(e["slashed"] for e in _logs(run, "pool", "WorkChallenged")))
    t = api(f"/api/pools/{run.pool_id}/trainer")
    assert (t["accepted_total"], t["rejected_total"]) == (2, 2)


def test_every_answer_is_its_model(run, api):
    """Every JSON route's answer over the court run, for every case, validator and evidence document, is the model
    the route declares (and its OpenAPI schema describes), field for field."""
    works = [WorkId(w).text for w in run.works.values()]
    validators = [f"/api/validators/{v}" for v in run.validators]
    checked = check_answers(api.app, api.url, {"pool_id": str(run.pool_id)}, paths={
        "/api/cases/{work_id}": [f"/api/cases/{w}" for w in works],
        "/api/works/{work_id}": [f"/api/works/{w}" for w in works],
        "/api/works/{work_id}/timeline": [f"/api/works/{w}/timeline" for w in works],
        "/api/evidence/{digest}": [f"/api/evidence/{hex_text(d)}" for d in run.evidence.values()],
        "/api/validators/{address}": validators,
        "/api/validators/{address}/verdicts": [f"{v}/verdicts" for v in validators],
        "/api/validators/{address}/earnings": [f"{v}/earnings" for v in validators],
        "/api/workers/{address}": [f"/api/workers/{run.worker}"],
        "/api/workers/{address}/submissions": [f"/api/workers/{run.worker}/submissions"],
        "/api/pools/{pool_id}/cases": [f"/api/pools/{run.pool_id}/cases", f"/api/pools/{run.pool_id}/cases?state=void"],
    }, absent=frozenset({"/api/summary"}))
    assert checked >= 50  # 25 routes, several of them at every case, validator and evidence document


def test_deep_links_and_the_api_description(run, api):
    for path in (f"/case/0x{run.works['overturn'].hex()}", f"/validator/{run.disputer}",
                 f"/pool/{run.pool_id}/court", f"/pool/{run.pool_id}/trainer"):
        moved = requests.get(api.url + path, allow_redirects=False, timeout=10)
        assert moved.status_code == 307 and moved.headers["location"] == "/#" + path
    metrics = requests.get(api.url + "/metrics", timeout=10).text
    assert f'proofswarm_explorer_court_cases{{pool="{run.pool_id}",state="final"}} 4.0' in metrics
    assert f'proofswarm_explorer_validator_penalties{{pool="{run.pool_id}",why="wrong verdict"}} 1.0' in metrics
    paths = api("/openapi.json")["paths"]
    for path in ("/api/pools/{pool_id}/court", "/api/pools/{pool_id}/cases", "/api/pools/{pool_id}/court/validators",
                 "/api/pools/{pool_id}/stats", "/api/pools/{pool_id}/trainer", "/api/cases/{work_id}",
                 "/api/validators/{address}", "/api/validators/{address}/verdicts",
                 "/api/validators/{address}/earnings", "/api/works/{work_id}/timeline"):
        assert path in paths, path


def test_a_validator_sees_its_standing_and_takes_its_stake_out_from_the_cli(run, api, tmp_path, capsys):
    """`validator status` agrees with the chain and the explorer; `deregister`, then `withdraw` refuses in one line
    while the exit delay runs and returns the bond after it."""
    deployments = tmp_path / "deployments.json"
    save_deployment(deployments, run.deployment)

    def cli(command: str, who: str) -> tuple[int, str, str]:
        i = next(i for i, a in enumerate(run.accounts) if a.address == who)
        code = validator_main([command, "--pool", str(run.pool_id), "--json", "--rpc-url", run.anvil.rpc_url,
                               "--deployments", str(deployments), "--key", hex_text(run.accounts[i].key)])
        out, err = capsys.readouterr()
        return code, out, err

    court = run.ledger(0).court
    code, out, _ = cli("status", run.judges["overturn"])
    status = json.loads(out)
    page = api(f"/api/validators/{run.judges['overturn']}")["pools"][0]
    assert code == 0 and status["verdicts_overturned"] == page["verdicts"]["overturned"] == 1
    assert str(status["penalties_total"]) == page["penalties_total"]
    assert str(status["locked"]) == page["live"]["locked"] == str(court.get_validator(run.pool_id,
                                                                                      run.judges["overturn"]).locked)
    assert int(status["penalties"]["wrong verdict"]) == COURT.wrong_verdict_slash
    code, out, _ = cli("status", run.disputer)
    assert json.loads(out)["disputes_won"] == 1

    leaving = next(v for v in (run.minority, *run.validators) if court.get_validator(run.pool_id, v).deregistered_at == 0)
    locked = court.get_validator(run.pool_id, leaving).locked
    code, out, _ = cli("deregister", leaving)
    assert code == 0 and json.loads(out)["deregistered"] is True
    cli("withdraw", leaving)  # its credits, if any; the bond stays until the exit delay has passed
    code, out, err = cli("withdraw", leaving)
    assert code == 1 and err.count("\n") == 1 and "the bond is locked until" in err
    run.travel(court.exit_delay(run.pool_id) + 1)
    code, out, _ = cli("withdraw", leaving)
    assert code == 0 and int(json.loads(out)["bond_withdrawn"]) == locked
    assert court.get_validator(run.pool_id, leaving).locked == 0


def test_a_worker_reads_why_it_was_challenged_and_its_daemon_stops_re_staking(run, api, tmp_path, capsys):
    """`worker status` lists each challenge with its reason, its evidence on IPFS and its page on the explorer;
    the daemon says the same when it sees the verdict, shows it on its live screen, and with --max-restakes 1
    stops at the second slash instead of re-staking."""
    deployments = tmp_path / "deployments.json"
    save_deployment(deployments, run.deployment)
    key = hex_text(run.accounts[WORKER].key)
    chain = ["--rpc-url", run.anvil.rpc_url, "--deployments", str(deployments), "--key", key]
    assert worker_main(["status", "--pool", str(run.pool_id), "--json", "--explorer", api.url, *chain]) == 0
    challenges = json.loads(capsys.readouterr().out)["challenges"]
    assert [(c["work_id"], c["reason"]) for c in challenges] == [(WorkId(run.works[n]).text, r) for n, r in (
        ("overturn", "DISPUTE"), ("toploc", "TOPLOC"))]
    toploc = challenges[1]
    assert toploc["evidence"] == f"ipfs://{digest_to_cid(run.evidence['toploc'])}"
    assert int(toploc["slashed"]) == run.config.slash_amount
    page = requests.get(toploc["explain"], timeout=10)  # the explorer's /work/ID opens the work's page
    assert page.status_code == 200 and "app.js" in page.text
    assert worker_main(["status", "--pool", str(run.pool_id), "--explorer", api.url, *chain]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("challenged TOPLOC: work 0x") and toploc["explain"] in lines[-1]

    daemon = WorkerDaemon(run.ledger(WORKER), WorkerOptions(pool_id=run.pool_id, kubo_api=run.kubo_api,
                                                            work_dir=tmp_path / "worker", max_restakes=1,
                                                            explorer=api.url),
                          producer=None, loader=None)
    for nonce, name in enumerate(("accepted", "toploc", "overturn")):
        daemon.journal.record(nonce, 0, digest="00" * 32, work_id=run.works[name].hex(), file="-", n_samples=N)
        daemon.journal.advance(nonce, "submitted")
    with pytest.raises(RestakeCapReached, match="slashed 2 times, the last for DISPUTE .*--max-restakes 1"):
        daemon.pending_verdicts()
    assert [c["reason"] for c in daemon.stats.challenges] == ["TOPLOC", "DISPUTE"]
    screen = Console(width=200, record=True)
    screen.print(status_table(daemon))
    text = screen.export_text()
    assert "challenged TOPLOC" in text and toploc["explain"] in text
    metrics = generate_latest(daemon.metrics.registry).decode()
    assert 'proofswarm_worker_challenges_total{reason="TOPLOC"} 1.0' in metrics
    assert "proofswarm_worker_slashed_tokens_total 100.0" in metrics


def test_a_worker_reads_a_final_case_once_for_its_outcome(run, tmp_path, monkeypatch):
    """A court pool's final case is the work's outcome and its submission time: the worker's verdict poll reads the
    case only, not also the pool's record of the work."""
    import worker.daemon

    from ledger_client.chain.queries import get_work

    expected = {name: get_work(run.ledger(WORKER), run.works[name]) for name in ("accepted", "toploc")}
    daemon = WorkerDaemon(run.ledger(WORKER), WorkerOptions(pool_id=run.pool_id, kubo_api=run.kubo_api,
                                                            work_dir=tmp_path / "worker", explorer=None),
                          producer=None, loader=None)
    for nonce, name in enumerate(expected):
        daemon.journal.record(nonce, 0, digest="00" * 32, work_id=run.works[name].hex(), file="-", n_samples=N)
        daemon.journal.advance(nonce, "submitted")
    monkeypatch.setattr(worker.daemon, "get_work", lambda *_: pytest.fail("the pool's record was read"))
    assert daemon.pending_verdicts() == 0
    # the accepted work was claimed in the scenario (PAID): the journal says accepted, and claiming reads the chain
    assert [w.status for w in expected.values()] == [WorkStatus.PAID, WorkStatus.REJECTED]
    assert [(e["final"], e["submitted_at"]) for e in daemon.journal.entries()] == [
        ("accepted", expected["accepted"].submitted_at), ("rejected", expected["toploc"].submitted_at)]


def test_index_after_a_reorg_with_court_events_equals_a_fresh_index(run, tmp_path):
    """Runs last (it rewrites the end of the run's chain): a submission is indexed, then the three blocks that
    record its assignment, move the clock and carry a stand-in's verdict (its silence penalty and credit) are
    replaced; the assignment's transaction is re-included in another block."""
    live = Store(tmp_path / "live.sqlite")
    indexer = ChainIndexer(live, run.w3, run.deployment)
    wid = run.submit(0xF6)
    indexer.poll_once()
    assigned = run.assigned(wid)
    receipt = run.ledger(0).court.draw_assignment(wid)
    run.travel(COURT.assigned_window_s + 1)
    court = run.ledger(0).court
    standin = next(v for v in run.validators if v != assigned and court.get_validator(run.pool_id, v).deregistered_at == 0)
    run.ledger(standin).court.attest(wid)
    indexer.poll_once()
    for name in ("AssignmentDrawn", "VerdictGiven", "ValidatorPenalized", "Credited"):
        assert live.select("SELECT 1 FROM events WHERE work_id = ? AND name = ?", (WorkId(wid).text, name)), name

    raw = run.w3.eth.get_raw_transaction(receipt["transactionHash"])
    assert "error" not in run.rpc("anvil_reorg", [3, [[raw.to_0x_hex(), 0]]])
    run.mine(2)
    indexer.poll_once()
    assert not live.select("SELECT 1 FROM events WHERE work_id = ? AND name = 'VerdictGiven'", (WorkId(wid).text,))
    (drawn,) = live.select("SELECT block_hash, pool_id FROM events WHERE name = 'AssignmentDrawn' AND work_id = ?",
                           (WorkId(wid).text,))
    assert drawn["block_hash"] != receipt["blockHash"].to_0x_hex() and drawn["pool_id"] == run.pool_id
    fresh = Store(tmp_path / "fresh.sqlite")
    ChainIndexer(fresh, run.w3, run.deployment).poll_once()
    assert live.all_events() == fresh.all_events()
