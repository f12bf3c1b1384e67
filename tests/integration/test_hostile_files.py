"""Hostile rollout files against a running validator (real anvil, Kubo, tiny policy and checker).

Every attack of issue 12 items 10–14 ends in a challenge with the right reason, and the same
daemon goes on to accept the next honest submission."""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from adversaries.files import HOSTILE_FILES
from inference.tiny import TINY_SORT_SPEC as SPEC
from ledger_client.chain.queries import get_work, pool_state
from ledger_client.ipfs.content import get_object, put_object
from protocol.pool import WorkStatus
from protocol.rollouts import decode_rollouts, encode_rollouts
from protocol.verdicts import Evidence, Reason
from tests.support.hooked_checker import HookedChecker
from worker.account import stake_for_next_submission
from tests.e2e.test_protocol import Protocol

ATTACKER = 5
ROWS = SPEC.prompts_per_submission * SPEC.sampling.group_size


@pytest.fixture(scope="module")
def protocol(tmp_path_factory, kubo_node):
    p = Protocol(tmp_path_factory.mktemp("hostile"), kubo_node)
    yield p
    p.close()


@pytest.fixture(scope="module")
def honest(protocol):
    return protocol.worker(4, per_step=100)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hooks")


@pytest.fixture(scope="module")
def validator(protocol, hooks):
    daemon = protocol.validator("hostile-validator", checker=functools.partial(HookedChecker, hooks),
                                fetch_timeout_s=1.0, fetch_attempts=3, retry_backoff_s=0.5, check_timeout_s=10.0,
                                max_checker_failures=3)
    yield daemon
    daemon.close()


@pytest.fixture(scope="module")
def honest_file(protocol, honest) -> bytes:
    assert honest.step_once(threading.Event())
    return Path(honest.journal.entries("submitted")[-1]["file"]).read_bytes()


def _submit_hostile(protocol, data: bytes | None, digest: bytes | None = None) -> bytes:
    """The attacker submits `data` (or an unfetchable `digest`) with its next nonce; returns the work id."""
    attacker, pool_id = protocol.ledger(ATTACKER), protocol.pool_id
    # allocation topped up after the previous test's slash
    stake_for_next_submission(attacker, pool_id, protocol.config.min_stake, protocol.config.slash_amount)
    if not attacker.pool.is_member(pool_id, attacker.address):
        attacker.pool.join_pool(pool_id)
    digest = put_object(protocol.kubo, data) if data is not None else digest
    step = pool_state(protocol.ledger(0), pool_id).latest_step
    nonce = attacker.pool.get_member(pool_id, attacker.address).next_nonce
    attacker.pool.submit_work(pool_id, step, nonce, digest, ROWS)
    return bytes(attacker.pool.work_id_of(pool_id, attacker.address, nonce))


def _judge(protocol, validator, work_ids: list[bytes], timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        validator.run_once()  # an exception here is a failure: the daemon must never stop
        if all(get_work(protocol.ledger(0), w).status != WorkStatus.PENDING for w in work_ids):
            return
        time.sleep(0.2)
    raise AssertionError(f"not judged within {timeout}s")


def _challenge(protocol, work_id: bytes) -> tuple[Reason, Evidence]:
    logs = protocol.ledger(0).pool.contract.events.WorkChallenged.get_logs(from_block=0)
    (log,) = [l for l in logs if bytes(l["args"]["workId"]) == work_id]
    evidence = Evidence.model_validate_json(get_object(protocol.kubo, bytes(log["args"]["evidenceDigest"])))
    return Reason(log["args"]["reasonCode"]), evidence


def _then_honest_is_accepted(protocol, validator, honest) -> None:
    before = len(honest.journal.entries("submitted"))
    assert honest.step_once(threading.Event())
    (work_id,) = [bytes.fromhex(e["work_id"]) for e in honest.journal.entries("submitted")[before:]]
    _judge(protocol, validator, [work_id])
    assert get_work(protocol.ledger(0), work_id).status == WorkStatus.ACCEPTED


def _as_attacker(protocol, honest_file: bytes, nonce: int) -> bytes:
    """The honest file, declared as the attacker's own (a distinct, well-formed file; the hooked checker
    crashes or hangs on it before any binding is compared)."""
    batch = decode_rollouts(honest_file)
    header = batch.header.model_copy(update={"worker": protocol.accounts[ATTACKER].address, "nonce": nonce})
    return encode_rollouts(batch.model_copy(update={"header": header}))


@pytest.mark.parametrize("attack", sorted(HOSTILE_FILES))
def test_hostile_file_is_challenged_as_schema_and_the_daemon_judges_on(protocol, validator, honest, honest_file,
                                                                       attack):
    data = HOSTILE_FILES[attack](honest_file)
    assert len(data) < 1024 * 1024  # one IPFS object: the chain accepts its digest
    work_id = _submit_hostile(protocol, data)
    _judge(protocol, validator, [work_id])
    reason, evidence = _challenge(protocol, work_id)
    assert reason == Reason.SCHEMA, evidence.message
    assert len(evidence.message) <= 200 and len(evidence.model_dump_json()) < 16_384
    _then_honest_is_accepted(protocol, validator, honest)


@pytest.mark.parametrize("hook", ["segfault", "hang"])
def test_file_that_kills_or_hangs_the_checker_is_challenged_after_three_tries(protocol, validator, honest, honest_file,
                                                                              hooks, hook):
    data = _as_attacker(protocol, honest_file, nonce=100 + len(hook))
    (hooks / f"{hashlib.sha256(data).hexdigest()}.{hook}").touch()
    failures_before = validator.metrics.registry.get_sample_value(
        "proofswarm_validator_check_failures_total", {"kind": "crash" if hook == "segfault" else "timeout"}) or 0
    work_id = _submit_hostile(protocol, data)
    _judge(protocol, validator, [work_id])
    reason, evidence = _challenge(protocol, work_id)
    assert reason == Reason.UNCHECKABLE
    assert ("SIGSEGV" if hook == "segfault" else "exceeded 10s") in evidence.message
    failures = validator.metrics.registry.get_sample_value(
        "proofswarm_validator_check_failures_total", {"kind": "crash" if hook == "segfault" else "timeout"})
    assert failures - failures_before == 3
    _then_honest_is_accepted(protocol, validator, honest)


def test_unavailable_file_is_retried_then_challenged(protocol, validator, honest):
    retries = functools.partial(validator.metrics.registry.get_sample_value, "proofswarm_validator_retries_total",
                                {"kind": "fetch"})
    retries_before = retries() or 0
    work_id = _submit_hostile(protocol, None, digest=os.urandom(32))
    started = time.monotonic()
    _judge(protocol, validator, [work_id])
    reason, evidence = _challenge(protocol, work_id)
    assert reason == Reason.UNAVAILABLE and "3 fetch attempts" in evidence.message
    assert retries() - retries_before == 2
    assert time.monotonic() - started >= 0.5 + 1.0  # the attempts were spread by the backoff, not back to back
    _then_honest_is_accepted(protocol, validator, honest)
