"""A file for a step whose checkpoint exact mode cannot run (docs/protocol.md R5.8) is the trainer's fault, not its
worker's: the checker answers "no verdict" (after the identity checks, which stay the worker's), loading that
checkpoint once however many files name it; the daemon then sends nothing — no attest, no challenge, no dispute —
logs one line and forgets the file, which expires unjudged (a court case: voided once its verdict window lapses)."""

from __future__ import annotations

import logging
import tomllib
from types import SimpleNamespace
from unittest.mock import MagicMock

import pytest
import torch

import validator.checks
from inference.exact import MAX_WEIGHT
from inference.tiny import build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from protocol.runspec import RunSpec, UnrunnablePolicy
from protocol.verdicts import Reason
from tests.support.paths import ROOT
from validator.checks import RolloutChecker, reference_backend
from validator.daemon import ValidatorDaemon
from validator.outcome import CheckOutcome, Purpose, Submission
from validator.retries import RetryBook


def _spec(inference: str) -> RunSpec:
    return RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run.toml").read_text()) | {"inference": inference})


def _past_the_bound():
    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(len(tokenizer), 0, hidden=16, layers=1, heads=2)
    with torch.no_grad():
        model.lm_head.weight[5, 2] = 2 * MAX_WEIGHT
    return model, tokenizer


def _submission(step: int = 3, purpose: Purpose = Purpose.JUDGE) -> Submission:
    return Submission(work_id=bytes([7]) * 32, pool_id=0, worker="0x" + "ab" * 20, step=step, n_samples=128, nonce=0,
                      rollout_digest=bytes(32), purpose=purpose)


def test_the_reference_backend_of_an_unrunnable_checkpoint_is_refused_in_exact_pools_only():
    model, tokenizer = _past_the_bound()
    with pytest.raises(UnrunnablePolicy, match=f"^lm_head: a weight of magnitude 64.0 ≥ {MAX_WEIGHT}$"):
        reference_backend(_spec("exact"), model, tokenizer)
    assert isinstance(reference_backend(_spec("float"), model, tokenizer), TorchBackend)


def _checker(monkeypatch, identity: CheckOutcome | None = None) -> tuple[RolloutChecker, list]:
    fetched = []
    monkeypatch.setattr(validator.checks, "decode_rollouts", lambda data, limits: SimpleNamespace())
    monkeypatch.setattr(validator.checks, "fetch_checkpoint", lambda kubo, digest, folder, retention: fetched.append(
        digest) or SimpleNamespace(path=folder, manifest=SimpleNamespace(verification=None)))
    checker = RolloutChecker.__new__(RolloutChecker)  # no chain or IPFS: the step's checkpoint is the stand-in's
    checker.spec, checker.limits, checker.device, checker.max_batch_tokens = _spec("exact"), None, "cpu", 1024
    checker.kubo, checker.retention, checker.cache_dir = None, SimpleNamespace(keep=3), ROOT / "unused"
    checker._policies, checker._unrunnable = {}, {}
    checker._load_policy = lambda path: _past_the_bound()
    checker._checkpoint_at = lambda step: bytes([step]) * 32
    checker._identity = lambda sub, batch, ckpt: identity
    return checker, fetched


def test_the_checker_gives_no_verdict_on_a_step_exact_mode_cannot_run_and_loads_it_once(monkeypatch):
    checker, fetched = _checker(monkeypatch)
    first, second = checker.check(_submission(), b"file"), checker.check(_submission(), b"another file")
    for outcome in (first, second):
        assert (outcome.no_verdict, outcome.ok, outcome.reason) == (True, False, None)
        assert outcome.message == (f"step 3's policy cannot run in exact mode (lm_head: a weight of magnitude 64.0 ≥ "
                                   f"{MAX_WEIGHT}): the trainer's fault, not the worker's")
    assert fetched == [bytes([3]) * 32]


def test_a_file_bound_to_another_submission_is_still_the_workers_fault(monkeypatch):
    wrong = CheckOutcome(False, Reason.WRONG_WORKER, "file names worker 0x…, submitted by 0x…")
    checker, fetched = _checker(monkeypatch, identity=wrong)
    assert checker.check(_submission(), b"file") is wrong and fetched == []


class _NoVerdicts:
    """A chain that must not be asked for a verdict."""

    def __getattr__(self, name):
        raise AssertionError(f"the daemon used the chain ({name}) for a file it cannot judge")


def _daemon(tmp_path, court_flow=None) -> ValidatorDaemon:
    daemon = ValidatorDaemon.__new__(ValidatorDaemon)  # only the verdict step runs
    daemon.ledger, daemon.court_flow, daemon.metrics = _NoVerdicts(), court_flow, MagicMock()
    daemon.retries = RetryBook(tmp_path / "retries.json")
    return daemon


NO_VERDICT = CheckOutcome(False, message="step 3's policy cannot run in exact mode (...)", no_verdict=True)


def test_the_daemon_sends_nothing_for_it_and_forgets_the_file(tmp_path, caplog):
    daemon, sub = _daemon(tmp_path), _submission()
    daemon.retries.record(sub, "checker", "an earlier crash", backoff_s=0.0)
    with caplog.at_level(logging.WARNING, logger="proofswarm.validator"):
        assert daemon._settle(sub, NO_VERDICT) == 0
    assert daemon.retries.get(sub.key) is None  # not retried, not counted towards UNCHECKABLE
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == f"work 0x{sub.work_id.hex()} (judge, step 3): no verdict: {NO_VERDICT.message}"


def test_a_court_judge_lets_the_case_lapse_and_an_auditor_neither_disputes_nor_concurs(tmp_path):
    court = MagicMock()
    daemon = _daemon(tmp_path, court_flow=court)
    assert daemon._settle(_submission(), NO_VERDICT) == 0
    court.finalize_when_lapsed.assert_called_once_with(_submission().work_id)
    for purpose in (Purpose.AUDIT, Purpose.VOTE):
        assert daemon._settle(_submission(purpose=purpose), NO_VERDICT) == 0
    court.finalize_when_lapsed.assert_called_once()
    court.conclude.assert_not_called()
