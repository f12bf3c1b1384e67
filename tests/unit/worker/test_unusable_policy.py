"""A worker in an exact pool whose trainer published a policy exact mode cannot run (docs/protocol.md R5.8) neither
crashes nor makes a file on it: the producer says UnrunnablePolicy, the daemon logs one line naming the step and the
bound, generates nothing more on that policy, and goes on once its nonce's step is stale and a usable policy comes.
The daemon runs on stand-ins for the chain; the producer quantises a real tiny model with one weight past the bound."""

from __future__ import annotations

import logging
import threading
import tomllib
from types import SimpleNamespace
from unittest.mock import MagicMock

import pytest
import torch

import worker.daemon
from inference.exact import MAX_WEIGHT
from inference.tiny import build_char_tokenizer, build_tiny_llama
from protocol.runspec import RunSpec, UnrunnablePolicy
from protocol.submission import local_binding
from tests.support.paths import ROOT
from worker.daemon import WorkerDaemon, WorkerOptions, WorkerStats
from worker.journal import Journal
from worker.policy import Policy
from worker.produce import Producer

WORKER = "0x" + "ab" * 20
ASYNC_LEVEL = 2


def _spec(inference: str) -> RunSpec:
    return RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run.toml").read_text()) | {"inference": inference})


def _policy(step: int, past_the_bound: bool) -> Policy:
    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(len(tokenizer), 0, hidden=16, layers=1, heads=2)
    if past_the_bound:
        with torch.no_grad():
            model.model.layers[0].mlp.down_proj.weight[3, 1] = -1.5 * MAX_WEIGHT
    return Policy(step, bytes([step]) * 32, model, tokenizer)


def test_the_producer_says_the_policy_is_unusable_naming_the_step_and_the_bound():
    with pytest.raises(UnrunnablePolicy, match=f"^the policy of step 7 cannot run in exact mode: layers.0.down: a weight "
                                             f"of magnitude 48.0 ≥ {MAX_WEIGHT}$"):
        Producer()(_policy(7, past_the_bound=True), _spec("exact"), local_binding(WORKER, 7, 0))


class _Chain:
    """The pool and this worker's record as the daemon reads them; `skip_nonce` pins the latest step."""

    def __init__(self) -> None:
        self.latest, self.pinned, self.nonce = 1, 1, 0
        self.skipped, self.submitted = [], []
        self.pool = SimpleNamespace(skip_nonce=self.skip_nonce, submit_work=self.submit_work)

    def state(self, look_every: float = 0.0) -> SimpleNamespace:
        return SimpleNamespace(active=True, latest_step=self.latest, async_level=ASYNC_LEVEL, min_stake=0, slash_amount=0)

    def member(self) -> SimpleNamespace:
        return SimpleNamespace(pinned_step=self.pinned, next_nonce=self.nonce)

    def skip_nonce(self, pool_id: int) -> None:
        self.skipped.append(self.nonce)
        self.nonce, self.pinned = self.nonce + 1, self.latest

    def submit_work(self, pool_id, step, nonce, digest, n_samples) -> None:
        self.submitted.append((step, nonce))
        self.nonce, self.pinned = self.nonce + 1, self.latest


def _daemon(tmp_path, chain: _Chain, produce, policies: dict[int, Policy], monkeypatch) -> WorkerDaemon:
    monkeypatch.setattr(worker.daemon, "stake_for_next_submission", lambda *args, **kwargs: 0)
    monkeypatch.setattr(worker.daemon, "next_binding",
                        lambda ledger, pool_id, member: local_binding(WORKER, member.pinned_step, member.next_nonce))
    daemon = WorkerDaemon.__new__(WorkerDaemon)  # only the step loop runs: the chain is the stand-in above
    daemon.ledger, daemon.produce, daemon.spec = chain, produce, _spec("exact")
    daemon.opt = WorkerOptions(pool_id=0, kubo_api="", work_dir=tmp_path, pace=False, poll_interval_s=3600.0)
    daemon.pool = chain.state()
    daemon.watch = SimpleNamespace(pool=chain.state)
    daemon.member = chain.member
    daemon.journal = Journal(tmp_path / "journal.json")
    daemon.stats, daemon.metrics, daemon.pacer = WorkerStats(), MagicMock(), MagicMock()
    daemon.upload = lambda kubo, data: None
    daemon.kubo, daemon.policy, daemon._quiet_step, daemon._refused = None, None, None, None
    daemon.chain = None  # a pool without forced errors
    daemon._court_can_judge, daemon._awaiting_verdicts, daemon._verdict_looked_at = True, False, float("inf")
    daemon._verdict_gap, daemon._last_look = daemon.opt.poll_interval_s, (0, 0)

    def sync_policy(step: int) -> None:
        daemon.policy = policies[step]

    daemon.sync_policy = sync_policy
    return daemon


def test_the_worker_refuses_the_step_once_and_waits_for_a_usable_policy(tmp_path, monkeypatch, caplog):
    made = []

    def produce(policy, spec, binding):
        if policy.step == 1:
            return Producer()(policy, spec, binding)  # the real quantiser refuses it
        made.append(binding.step)
        return b"a file", 128

    chain, stop = _Chain(), threading.Event()
    daemon = _daemon(tmp_path, chain, produce, {1: _policy(1, past_the_bound=True), 4: _policy(4, False)},
                     monkeypatch)
    with caplog.at_level(logging.INFO, logger="proofswarm.worker"):
        daemon.step_once(stop)
        assert (made, chain.submitted, daemon.journal.entries()) == ([], [], [])  # nothing made, uploaded or sent
        chain.latest = 2  # a newer step, but the nonce stays pinned to step 1 until step 1 is stale
        assert not daemon.step_once(stop) and not daemon.step_once(stop)
        assert daemon._quiet_step == 2 and chain.skipped == []
    refusals = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(refusals) == 1  # one line, however long the worker waits
    line = refusals[0].getMessage()
    assert line.startswith("the policy of step 1 cannot run in exact mode: layers.0.down: a weight of magnitude 48.0")
    assert "generating nothing on step 1: waiting for a usable policy" in line

    chain.latest = 1 + ASYNC_LEVEL + 1  # step 1 is stale: its nonce is skipped, the next one is pinned to step 4
    with caplog.at_level(logging.INFO, logger="proofswarm.worker"):
        assert daemon.step_once(stop)
    assert chain.skipped == [0] and made == [4] and chain.submitted == [(4, 1)]
