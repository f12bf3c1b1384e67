"""The whole protocol on a real anvil + Kubo with a real (tiny) policy: honest work is accepted and
trained on exactly once; every adversary is challenged and slashed."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from pathlib import Path

import pytest

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pool_cli import create_pool
from examples.adversaries.workers import ATTACKS, cycling, selective_upload
from inference.policy import load_policy
from ledger_client.chain.errors import revert_class
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.chain.queries import get_work, pool_state
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.pool import WorkStatus
from protocol.rollouts import decode_rollouts, encode_rollouts
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.verdicts import Reason
from tests.conftest_chain import TOKENS, pool_config
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.ledger_source import LedgerSource
from trainer.publish import base_checkpoint_digest
from validator.checks import RolloutChecker
from validator.daemon import DaemonConfig, ValidatorDaemon
from worker.daemon import WorkerDaemon, WorkerOptions
from worker.produce import produce_rollout_file

SPEC = RunSpec(
    # length targets make rewards continuous, so even an untrained policy's groups carry a learning signal
    task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}, "length_targets": [4, 8]},
    sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=8),
    prompts_per_submission=2,
    pool_seed="0x" + "5e" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.05,
                                  toploc_max_mant_err_median=0.0),
)
EXPECTED = {
    "fabricated_rewards": {Reason.REWARD},
    "cherry_picked_prompts": {Reason.ASSIGNMENT},
    "tampered_completion": {Reason.TERMINATION, Reason.SAMPLING, Reason.LOGPROBS, Reason.TOPLOC},
    "wrong_temperature": {Reason.SAMPLING},
    "greedy_decoding": {Reason.SAMPLING},
    "other_weights": {Reason.SAMPLING, Reason.LOGPROBS, Reason.TOPLOC, Reason.TERMINATION},
    "perturbed_weights": {Reason.SAMPLING, Reason.LOGPROBS, Reason.TOPLOC, Reason.TERMINATION},
    "corrupted_proofs": {Reason.TOPLOC},
    "truncated_completion": {Reason.TERMINATION},
    "altered_logprobs": {Reason.LOGPROBS},
    "withheld": {Reason.UNAVAILABLE},
}


class Protocol:
    """A pool whose base checkpoint and run spec are real IPFS objects."""

    def __init__(self, tmp: Path, kubo_node):
        self.tmp = tmp
        self.anvil = start_anvil(tmp / "anvil.log")
        self.w3 = connect(self.anvil.rpc_url, 31337)
        self.accounts = dev_accounts(10)
        self.deployment = deploy_contracts(self.w3, self.accounts[0])
        admin = self.ledger(0)
        for i in (1, 4, 5, 6):
            admin.token.mint(self.accounts[i].address, 1_000_000 * TOKENS)
        self.kubo_api = kubo_node.api_multiaddr
        self.kubo = KuboClient(self.kubo_api)
        # a short warm start: the policy emits answers of varying length and EOS, so groups are informative
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=40, warm_lr=3e-3)
        base = base_checkpoint_digest(self.kubo, model.state_dict(), model.config, tokenizer)
        task_ref = publish_run_spec(self.kubo, SPEC)
        cfg = pool_config(self.accounts, task="0x" + task_ref.hex(), base_checkpoint="0x" + base.hex(),
                          challenge_window_s=3600, reward_lock_s=3600)
        self.config = cfg
        self.pool_id = create_pool(self.ledger(1), cfg)
        self.deployments = tmp / "deployments.json"
        save_deployment(self.deployments, self.deployment)

    def ledger(self, i: int) -> Ledger:
        return Ledger(self.w3, self.deployment, self.accounts[i])

    def worker(self, i: int, producer=produce_rollout_file, upload=None, per_step: int = 1) -> WorkerDaemon:
        opts = WorkerOptions(pool_id=self.pool_id, kubo_api=self.kubo_api, work_dir=self.tmp / f"worker{i}",
                             submissions_per_step=per_step, max_pending=per_step)
        kwargs = {"upload": upload} if upload else {}
        daemon = WorkerDaemon(self.ledger(i), opts, producer, load_policy, **kwargs)
        daemon.prepare()
        return daemon

    def validator(self, name: str = "validator", checker=RolloutChecker, **config) -> ValidatorDaemon:
        """A validator daemon of the pool; `checker` (a RolloutChecker subclass) and DaemonConfig overrides."""
        state = self.tmp / name
        factory = functools.partial(checker, self.anvil.rpc_url, str(self.deployments), self.kubo_api,
                                    self.pool_id, state / "cache")
        options = {"fetch_timeout_s": 3.0, "fetch_attempts": 1, **config}
        return ValidatorDaemon(self.ledger(3), DaemonConfig(pool_id=self.pool_id, state_dir=state,
                                                            kubo_api=self.kubo_api, **options), factory)

    def close(self) -> None:
        self.kubo.close()
        self.anvil.stop()


@pytest.fixture(scope="module")
def protocol(tmp_path_factory, kubo_node):
    p = Protocol(tmp_path_factory.mktemp("protocol"), kubo_node)
    yield p
    p.close()


def _digests(daemon: WorkerDaemon) -> list[bytes]:
    return [bytes.fromhex(e["digest"]) for e in daemon.journal.entries("submitted")]


def test_honest_and_adversarial_work_are_told_apart(protocol):
    honest = protocol.worker(4)
    attacks = cycling(list(ATTACKS))
    adversary = protocol.worker(5, producer=attacks, upload=selective_upload, per_step=len(ATTACKS))
    stop = threading.Event()
    assert honest.step_once(stop)
    for _ in ATTACKS:
        assert adversary.step_once(stop)
    validator = protocol.validator()
    try:
        assert validator.run_once() == 1 + len(ATTACKS)
    finally:
        validator.close()

    (honest_digest,) = _digests(honest)
    assert get_work(protocol.ledger(0), honest_digest).status == WorkStatus.ACCEPTED
    logs = protocol.ledger(0).pool.contract.events.WorkChallenged.get_logs(from_block=0)
    reasons = {bytes(l["args"]["workId"]): Reason(l["args"]["reasonCode"]) for l in logs}
    matrix = Counter()
    for entry, name in zip(sorted(adversary.journal.entries("submitted"), key=lambda e: e["nonce"]), attacks.used,
                           strict=True):
        reason = reasons.get(bytes.fromhex(entry["digest"]))
        matrix[(name, reason.name if reason else "ACCEPTED")] += 1
        assert reason in EXPECTED[name], f"{name}: {reason}"
    print("\nattack → verdict:", dict(matrix))
    slashed = protocol.ledger(0).stake.bonded_of(protocol.accounts[5].address)
    assert slashed == 0  # 11 challenges × 50 tokens exceed the 100 staked: all of it is gone

    source = LedgerSource(protocol.ledger(2), protocol.kubo, protocol.pool_id)
    items = source.poll()
    assert [i.id for i in items] == ["0x" + honest_digest.hex()]
    assert source.poll() == []
    restarted = LedgerSource(protocol.ledger(2), protocol.kubo, protocol.pool_id)
    restarted.restore(source.state())
    assert restarted.poll() == []


def test_stale_and_duplicate_submissions_are_refused_on_chain(protocol):
    worker = protocol.worker(6)
    stop = threading.Event()
    worker.step_once(stop)
    (digest,) = _digests(worker)
    with pytest.raises(revert_class("DuplicateWork")):  # resubmitting another worker's file
        protocol.ledger(4).pool.submit_work(protocol.pool_id, 0, digest, 8)
    trainer = protocol.ledger(2)
    for step in (1, 2, 3):
        trainer.pool.publish_checkpoint(protocol.pool_id, step, bytes([step]) * 32)
    with pytest.raises(revert_class("StaleStep")):  # step 0 is older than the async level (2) allows
        protocol.ledger(6).pool.submit_work(protocol.pool_id, 0, b"\x77" * 32, 8)


def test_another_workers_file_rewritten_as_own_is_challenged(protocol, tmp_path):
    honest = protocol.worker(4)
    batch = decode_rollouts(Path(honest.journal.entries("submitted")[0]["file"]).read_bytes())
    thief = protocol.accounts[6].address
    step = pool_state(protocol.ledger(0), protocol.pool_id).latest_step
    # Declared as the thief's own and for the current step so the chain takes it; the validator must refuse it.
    header = batch.header.model_copy(update={"worker": thief, "policy_step": step})
    digest = put_object(protocol.kubo, encode_rollouts(batch.model_copy(update={"header": header})))
    protocol.ledger(6).pool.submit_work(protocol.pool_id, step, digest, len(batch.samples))
    validator = protocol.validator("validator-2")
    try:
        validator.run_once()
    finally:
        validator.close()
    assert get_work(protocol.ledger(0), digest).status == WorkStatus.REJECTED
