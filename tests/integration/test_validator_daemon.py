"""The validator daemon's chain and IPFS mechanics against real anvil + Kubo.

The rollout checks themselves are exercised by the adversary tests; here a small checker that
rejects files starting with b"bad" stands in (and segfaults, hangs or raises on files that ask
it to), so these tests isolate fetching, retries, checker failures, verdicts, evidence,
idempotency and metrics.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import time

import pytest

from ledger_client.chain.queries import get_work
from ledger_client.ipfs.content import get_object, put_object
from protocol.pool import WorkStatus
from protocol.verdicts import Evidence, Reason
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon
from validator.outcome import CheckOutcome, Submission


class PrefixChecker:
    def check(self, submission: Submission, data: bytes) -> CheckOutcome:
        if data.startswith(b"segfault"):
            ctypes.string_at(0)  # a real SIGSEGV in the checker process
        if data.startswith(b"hang"):
            time.sleep(3600)
        if data.startswith(b"raise"):
            raise RuntimeError("x" * 100_000)
        if data.startswith(b"bad"):
            return CheckOutcome(False, Reason.SCHEMA, "not a rollout file", statistics={"bytes": len(data)})
        return CheckOutcome(True, tokens=len(data))


def make_prefix_checker() -> PrefixChecker:
    return PrefixChecker()


@pytest.fixture
def daemon_factory(chain, kubo_node, tmp_path):
    made = []

    def make(state="validator", **overrides) -> ValidatorDaemon:
        values = dict(fetch_timeout_s=1.0, fetch_attempts=2, retry_backoff_s=0.2, check_timeout_s=5.0,
                      processes=1, max_in_flight=2)
        cfg = DaemonConfig(pool_id=chain.pool_id, state_dir=tmp_path / state, kubo_api=kubo_node.api_multiaddr,
                           **{**values, **overrides})
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
    assert daemon.run_once() == 2  # the missing file waits for its second fetch attempt
    assert get_work(chain.owner, missing).status == WorkStatus.PENDING
    assert _run_until_judged(daemon, chain, [missing])
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


def _run_until_judged(daemon: ValidatorDaemon, chain, work_ids: list[bytes], timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        daemon.run_once()
        if all(get_work(chain.owner, w).status != WorkStatus.PENDING for w in work_ids):
            return True
        time.sleep(0.2)
    return False


def _reason(chain, work_id: bytes) -> Reason | None:
    logs = chain.owner.pool.contract.events.WorkChallenged.get_logs(from_block=0)
    return next((Reason(l["args"]["reasonCode"]) for l in logs if bytes(l["args"]["workId"]) == work_id), None)


def _metric(daemon: ValidatorDaemon, name: str, labels: dict | None = None) -> float:
    return daemon.metrics.registry.get_sample_value(name, labels or {}) or 0.0


def test_unavailable_file_is_fetched_again_with_backoff_then_challenged(chain, kubo, daemon_factory):
    missing = chain.submit(0, bytes.fromhex("cd" * 32), 1)  # work id of a file never uploaded
    daemon = daemon_factory(fetch_attempts=3, retry_backoff_s=1.0)
    assert daemon.run_once() == 0
    assert daemon.run_once() == 0  # the retry is not due yet
    assert _metric(daemon, "proofswarm_validator_retries_total", {"kind": "fetch"}) == 1
    put_object(kubo, b"late but here")  # an unrelated upload: the missing file stays missing
    started = time.monotonic()
    assert _run_until_judged(daemon, chain, [missing])
    assert time.monotonic() - started >= 1.0  # attempts 2 and 3 came after 1 s and 2 s of backoff
    assert _reason(chain, missing) == Reason.UNAVAILABLE
    assert _metric(daemon, "proofswarm_validator_retries_total", {"kind": "fetch"}) == 2
    assert not daemon.retries.entries


def test_file_uploaded_between_attempts_is_judged_on_its_content(chain, kubo, daemon_factory):
    data = b"good but late"
    digest = hashlib.sha256(data).digest()
    work_id = chain.submit(0, digest, 1)
    daemon = daemon_factory(fetch_attempts=3)
    assert daemon.run_once() == 0
    assert put_object(kubo, data) == digest
    assert _run_until_judged(daemon, chain, [work_id])
    assert get_work(chain.owner, work_id).status == WorkStatus.ACCEPTED


@pytest.mark.parametrize("kind, payload", [("crash", b"segfault me"), ("timeout", b"hang forever"),
                                           ("error", b"raise an exception")])
def test_file_that_breaks_the_checker_is_challenged_after_three_failures(chain, kubo, daemon_factory, kind, payload):
    hostile = put_object(kubo, payload)
    honest = put_object(kubo, b"honest after " + payload)
    hostile = chain.submit(0, hostile, 1)
    daemon = daemon_factory(check_timeout_s=3.0, max_checker_failures=3)
    assert daemon.run_once() == 0  # first failure: the file is kept for another try, in a fresh process
    honest = chain.submit(1, honest, 1)
    assert _run_until_judged(daemon, chain, [hostile, honest])
    assert _reason(chain, hostile) == Reason.UNCHECKABLE
    assert get_work(chain.owner, honest).status == WorkStatus.ACCEPTED  # the daemon judged on after the failures
    assert _metric(daemon, "proofswarm_validator_check_failures_total", {"kind": kind}) == 3
    if kind != "error":
        assert _metric(daemon, "proofswarm_validator_checker_restarts_total") == 3
    logs = chain.owner.pool.contract.events.WorkChallenged.get_logs(from_block=0)
    evidence_digest = next(bytes(l["args"]["evidenceDigest"]) for l in logs if bytes(l["args"]["workId"]) == hostile)
    evidence = Evidence.model_validate_json(get_object(kubo, evidence_digest))
    assert evidence.reason == "UNCHECKABLE" and "3 times" in evidence.message and len(evidence.message) <= 200
    assert len(evidence.statistics["attempts"]) == 3


def test_retries_survive_a_restart(chain, kubo, daemon_factory):
    missing = chain.submit(0, bytes.fromhex("ef" * 32), 1)
    first = daemon_factory("v", fetch_attempts=2)
    assert first.run_once() == 0  # cursor committed past the submission, which waits in the retry book
    first.close()
    restarted = daemon_factory("v", fetch_attempts=2)
    assert _run_until_judged(restarted, chain, [missing])
    assert _reason(chain, missing) == Reason.UNAVAILABLE


def test_uncommitted_batch_is_redelivered_but_not_judged_twice(chain, kubo, daemon_factory):
    chain.submit(0, put_object(kubo, b"good again"), 1)
    first = daemon_factory("v")
    subs = [e for e in first.cursor.poll()]  # delivered, judged, but "killed" before commit
    first._judge_all([Submission.of_event(e) for e in subs])
    first.close()
    again = daemon_factory("v")
    assert again.run_once() == 0  # redelivered, already judged on-chain: skipped
    assert again.metrics.skipped._value.get() == 1


def test_a_poll_that_fails_after_its_cursor_moved_loses_no_submission(chain, kubo, daemon_factory, monkeypatch):
    """The cursor read the submission, then judging failed (a chain or Kubo error mid-poll): `run` forgets the poll,
    and the next one judges the submission instead of skipping it for good."""
    work = chain.submit(0, put_object(kubo, b"good after a failed poll"), 1)
    daemon = daemon_factory("v")
    judge_all = daemon._judge_all

    def fail_once(subs):
        monkeypatch.setattr(daemon, "_judge_all", judge_all)
        raise ConnectionError("RPC gone mid-poll")

    monkeypatch.setattr(daemon, "_judge_all", fail_once)
    with pytest.raises(ConnectionError):
        daemon.run_once()
    assert daemon.cursor.state["next_block"] > daemon.cursor_journal.saved()["next_block"]  # moved, not committed
    daemon.forget_failed_poll()  # what `run` does after a failed poll
    assert daemon.run_once() == 1
    assert get_work(chain.owner, work).status == WorkStatus.ACCEPTED


def test_metrics_count_verdicts_by_reason(chain, kubo, daemon_factory):
    chain.submit(0, put_object(kubo, b"bad one"), 1)
    chain.submit(1, put_object(kubo, b"fine"), 1)
    daemon = daemon_factory()
    daemon.run_once()
    text = __import__("prometheus_client").generate_latest(daemon.metrics.registry).decode()
    assert 'proofswarm_validator_verdicts_total{reason="SCHEMA",verdict="challenged"} 1.0' in text
    assert 'proofswarm_validator_verdicts_total{reason="ok",verdict="accepted"} 1.0' in text
    assert "proofswarm_validator_backlog 0.0" in text


def test_a_backlog_is_checked_a_bounded_batch_per_poll_and_nothing_is_lost(chain, kubo, daemon_factory):
    """A poll checks at most max_checks_per_poll files and leaves the rest in the retry book (no attempt counted),
    so the court duties every poll ends with are never held up by a backlog; the next polls judge the rest."""
    works = [chain.submit(i % 2, put_object(kubo, f"good file {i}".encode()), 4) for i in range(5)]
    daemon = daemon_factory(max_checks_per_poll=2)
    assert daemon.run_once() == 2
    waiting = daemon.retries.entries
    assert len(waiting) == 3 and all(e.fetch + e.checker + e.errors == 0 for e in waiting.values())
    assert daemon.run_once() == 2 and daemon.run_once() == 1 and daemon.run_once() == 0
    assert all(get_work(chain.owner, w).status == WorkStatus.ACCEPTED for w in works)
