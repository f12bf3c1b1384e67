"""The validator daemon's chain and IPFS mechanics against real anvil + Kubo.

The rollout checks themselves are exercised by the adversary tests; here a small checker that
rejects files starting with b"bad" stands in, so these tests isolate fetching, verdicts,
evidence, idempotency and metrics.
"""

from __future__ import annotations

import json

import pytest

from ledger_client.chain.queries import get_work
from ledger_client.ipfs.content import get_object, put_object
from protocol.pool import WorkStatus
from protocol.verdicts import Evidence, Reason
from validator.daemon import CheckOutcome, DaemonConfig, Submission, ValidatorDaemon


class PrefixChecker:
    def check(self, submission: Submission, data: bytes) -> CheckOutcome:
        if data.startswith(b"bad"):
            return CheckOutcome(False, Reason.SCHEMA, "not a rollout file", statistics={"bytes": len(data)})
        return CheckOutcome(True, tokens=len(data))


def make_prefix_checker() -> PrefixChecker:
    return PrefixChecker()


@pytest.fixture
def daemon_factory(chain, kubo_node, tmp_path):
    made = []

    def make(state="validator") -> ValidatorDaemon:
        cfg = DaemonConfig(pool_id=chain.pool_id, state_dir=tmp_path / state, kubo_api=kubo_node.api_multiaddr,
                           fetch_timeout_s=2.0, processes=1, max_in_flight=2)
        d = ValidatorDaemon(chain.validator, cfg, make_prefix_checker)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def test_every_submission_gets_exactly_one_verdict(chain, kubo, daemon_factory, tmp_path):
    good = put_object(kubo, b"good rollout file")
    bad = put_object(kubo, b"bad rollout file")
    missing = bytes.fromhex("ab" * 32)  # never uploaded
    good, bad, missing = [chain.submit(i % 2, digest, 4) for i, digest in enumerate((good, bad, missing))]  # work ids

    daemon = daemon_factory()
    assert daemon.run_once() == 3
    assert get_work(chain.owner, good).status == WorkStatus.ACCEPTED
    assert get_work(chain.owner, bad).status == WorkStatus.REJECTED
    assert get_work(chain.owner, missing).status == WorkStatus.REJECTED

    logs = chain.owner.pool.contract.events.WorkChallenged.get_logs(from_block=0)
    reasons = {bytes(l["args"]["workId"]): l["args"]["reasonCode"] for l in logs}
    assert reasons == {bad: Reason.SCHEMA, missing: Reason.UNAVAILABLE}
    evidence_digest = next(bytes(l["args"]["evidenceDigest"]) for l in logs if bytes(l["args"]["workId"]) == bad)
    evidence = Evidence.model_validate_json(get_object(kubo, evidence_digest))
    assert evidence.reason == "SCHEMA" and evidence.statistics == {"bytes": 16}

    assert daemon.run_once() == 0  # nothing new
    daemon.close()
    restarted = daemon_factory()  # same state dir: resumes after the committed cursor
    assert restarted.run_once() == 0
    journal = [json.loads(l) for l in (tmp_path / "validator" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(j["verdict"] for j in journal) == ["accepted", "challenged", "challenged"]


def test_uncommitted_batch_is_redelivered_but_not_judged_twice(chain, kubo, daemon_factory):
    chain.submit(0, put_object(kubo, b"good again"), 1)
    first = daemon_factory("v")
    subs = [e for e in first.cursor.poll()]  # delivered, judged, but "killed" before commit
    first._judge_all([Submission.of_event(e) for e in subs])
    first.close()
    again = daemon_factory("v")
    assert again.run_once() == 0  # redelivered, already judged on-chain: skipped
    assert again.metrics.skipped._value.get() == 1


def test_metrics_count_verdicts_by_reason(chain, kubo, daemon_factory):
    chain.submit(0, put_object(kubo, b"bad one"), 1)
    chain.submit(1, put_object(kubo, b"fine"), 1)
    daemon = daemon_factory()
    daemon.run_once()
    text = __import__("prometheus_client").generate_latest(daemon.metrics.registry).decode()
    assert 'proofswarm_validator_verdicts_total{reason="SCHEMA",verdict="challenged"} 1.0' in text
    assert 'proofswarm_validator_verdicts_total{reason="ok",verdict="accepted"} 1.0' in text
    assert "proofswarm_validator_backlog 0.0" in text
