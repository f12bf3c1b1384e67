"""Spot checks on a real anvil + Kubo with a real (tiny) policy: the validator prefills only the m chosen
completions, catches a fabricated one when it is chosen, waits for block B + 1 before checking, and puts
the indices and their randomness in a challenge's evidence."""

from __future__ import annotations

import functools
import json

import pytest
from eth_utils import keccak

from adversaries.workers import fabricate_completions
from dashboard.evidence import verify_draw
from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import create_pool
from inference.torch_backend import TorchBackend
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.chain.queries import get_work, next_binding, pool_state
from ledger_client.ipfs.content import get_object, publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import hex_text
from protocol.pool import WorkStatus
from protocol.rollouts import encode_rollouts
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.spotcheck import spot_check_indices, spot_check_randomness
from protocol.submission import SubmissionBinding
from protocol.verdicts import Evidence, Reason
from tests.support.conftest_chain import TOKENS, pool_config
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest
from validator.checks import RolloutChecker
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon
from validator.outcome import Submission
from worker.account import stake_for_next_submission
from worker.policy import Policy
from worker.produce import make_batch

SPEC = RunSpec(
    task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}},
    sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=8),
    prompts_per_submission=2,  # n = 8 completions per file
    pool_seed="0x" + "5f" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                  toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True,
                                  spot_check_bps=2_500),  # m = ceil(0.25 × 8) = 2
)
N, M = 8, 2
PREFILL_CHECKS = {Reason.SAMPLING, Reason.TOPLOC, Reason.TERMINATION}


class SpotPool:
    def __init__(self, tmp, kubo_node):
        self.tmp = tmp
        self.anvil = start_anvil(tmp / "anvil.log")
        self.w3 = connect(self.anvil.rpc_url, 31337)
        self.accounts = dev_accounts(10)
        self.deployment = deploy_contracts(self.w3, self.accounts[0])
        for i in (1, 4):
            Ledger(self.w3, self.deployment, self.accounts[0]).token.mint(self.accounts[i].address, 10**6 * TOKENS)
        self.kubo_api = kubo_node.api_multiaddr
        self.kubo = KuboClient(self.kubo_api)
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
        base = base_checkpoint_digest(self.kubo, model.state_dict(), model.config, tokenizer)
        self.policy = Policy(0, base, model, tokenizer)
        self.config = pool_config(self.accounts, task=hex_text(publish_run_spec(self.kubo, SPEC)),
                                  base_checkpoint=hex_text(base), challenge_window_s=3600, reward_lock_s=7200,
                                  max_samples_per_work=None)
        self.pool_id = create_pool(self.ledger(1), self.config, SPEC)  # n and q from the run spec
        self.deployments = tmp / "deployments.json"
        save_deployment(self.deployments, self.deployment)
        worker = self.ledger(4)
        worker.ensure_allocation(self.pool_id, self.config.min_stake)
        worker.pool.join_pool(self.pool_id)

    def ledger(self, i: int) -> Ledger:
        return Ledger(self.w3, self.deployment, self.accounts[i])

    def binding(self) -> SubmissionBinding:
        """Worker 4's next submission, as the chain pinned it."""
        return next_binding(self.ledger(4), self.pool_id)

    def checker(self, name: str) -> RolloutChecker:
        return RolloutChecker(self.anvil.rpc_url, str(self.deployments), self.kubo_api, self.pool_id,
                              self.tmp / name / "cache")

    def submit(self, data: bytes) -> tuple[bytes, int]:
        """Worker 4 submits `data` with its next nonce; (work id, block of the WorkSubmitted event)."""
        ledger = self.ledger(4)
        stake_for_next_submission(ledger, self.pool_id, self.config.min_stake, self.config.slash_amount)
        nonce = ledger.pool.get_member(self.pool_id, ledger.address).next_nonce
        receipt = ledger.pool.submit_work(self.pool_id, 0, nonce, put_object(self.kubo, data), N)
        return bytes(ledger.pool.work_id_of(self.pool_id, ledger.address, nonce)), receipt["blockNumber"]

    def close(self) -> None:
        self.kubo.close()
        self.anvil.stop()


@pytest.fixture(scope="module")
def pool(tmp_path_factory, kubo_node):
    p = SpotPool(tmp_path_factory.mktemp("spot"), kubo_node)
    yield p
    p.close()


def _block_hash_choosing(work_id: bytes, index: int, chosen: bool) -> bytes:
    """A (made-up) block hash under which completion `index` is (or is not) spot-checked."""
    for i in range(10_000):
        block_hash = keccak(i.to_bytes(8, "big"))
        if (index in spot_check_indices(spot_check_randomness(block_hash, work_id), N, SPEC.verification.spot_check_bps)) == chosen:
            return block_hash
    raise AssertionError("no such block hash")


def test_pool_takes_its_spot_check_fraction_from_the_run_spec(pool):
    assert pool_state(pool.ledger(0), pool.pool_id).spot_check_bps == 2_500


def test_checker_prefills_only_the_chosen_completions_and_catches_a_fabricated_one_when_chosen(pool, monkeypatch):
    binding = pool.binding()
    seed_block = pool.ledger(4).pool.get_member(pool.pool_id, binding.worker).pinned_block
    honest = make_batch(pool.policy, SPEC, binding)
    fabricated_at = next(i for i, s in enumerate(honest.samples) if len(s.completion_ids) >= 2)
    cheat = encode_rollouts(fabricate_completions(pool.policy, SPEC, honest, [fabricated_at]))
    prefilled: list[int] = []
    original = TorchBackend.prefill_batch

    def counting(self, batch, *args, **kwargs):
        prefilled.append(len(batch))
        return original(self, batch, *args, **kwargs)

    monkeypatch.setattr(TorchBackend, "prefill_batch", counting)
    checker = pool.checker("checker")

    def check(data: bytes, block_hash: bytes):
        sub = Submission(binding.work_id, pool.pool_id, binding.worker, 0, N, 0, b"\x00" * 32,
                         spot_block=7, spot_block_hash=block_hash, seed_block=seed_block)
        prefilled.clear()
        return checker.check(sub, data)

    missed = check(cheat, _block_hash_choosing(binding.work_id, fabricated_at, chosen=False))
    assert missed.ok and prefilled == [M] and fabricated_at not in missed.spot_check["indices"]
    assert missed.spot_check["m"] == M and missed.checked_tokens < missed.tokens

    caught = check(cheat, _block_hash_choosing(binding.work_id, fabricated_at, chosen=True))
    assert not caught.ok and caught.reason in PREFILL_CHECKS and prefilled == [M]
    assert caught.failing_samples == [fabricated_at] and fabricated_at in caught.spot_check["indices"]

    honest_bytes = encode_rollouts(honest)
    assert check(honest_bytes, _block_hash_choosing(binding.work_id, fabricated_at, chosen=True)).ok

    # The cheap checks still cover every completion: a wrong seed where nothing is prefilled is caught.
    unchosen = next(i for i in range(N) if i not in missed.spot_check["indices"])
    samples = list(honest.samples)
    samples[unchosen] = samples[unchosen].model_copy(update={"seed": samples[unchosen].seed ^ 1})
    wrong_seed = encode_rollouts(honest.model_copy(update={"samples": samples}))
    outcome = check(wrong_seed, _block_hash_choosing(binding.work_id, fabricated_at, chosen=False))
    assert (outcome.ok, outcome.reason, outcome.failing_samples) == (False, Reason.SEED, [unchosen])


def test_daemon_waits_for_the_next_block_and_the_evidence_carries_the_draw(pool):
    ledger = pool.ledger(4)
    honest = make_batch(pool.policy, SPEC, pool.binding())
    honest_id, _ = pool.submit(encode_rollouts(honest))
    to_fabricate = make_batch(pool.policy, SPEC, pool.binding())  # pinned by the honest submission's block
    cheat = fabricate_completions(pool.policy, SPEC, to_fabricate, range(N))
    cheat_id, cheat_block = pool.submit(encode_rollouts(cheat))  # every completion fabricated: caught whatever m

    state = pool.tmp / "daemon"
    factory = functools.partial(RolloutChecker, pool.anvil.rpc_url, str(pool.deployments), pool.kubo_api,
                                pool.pool_id, state / "cache")
    daemon = ValidatorDaemon(pool.ledger(3), DaemonConfig(pool_id=pool.pool_id, state_dir=state,
                                                          kubo_api=pool.kubo_api, poll_interval_s=0.0), factory)
    try:
        assert pool.w3.eth.block_number == cheat_block  # automine: nothing after the last submission yet
        # The honest work's B + 1 exists (the cheat's submission), the cheat's does not: it waits.
        assert daemon.run_once() == 1
        assert get_work(ledger, honest_id).status == WorkStatus.ACCEPTED
        assert get_work(ledger, cheat_id).status == WorkStatus.PENDING
        assert json.loads((state / "retries.json").read_text()).keys() == {cheat_id.hex()}
        # The attest transaction was block B + 1 of the cheat's submission: now it is checked.
        assert daemon.run_once() == 1
    finally:
        daemon.close()
    assert get_work(ledger, cheat_id).status == WorkStatus.REJECTED
    (log,) = ledger.pool.contract.events.WorkChallenged.get_logs(from_block=0, argument_filters={"workId": cheat_id})
    assert Reason(log["args"]["reasonCode"]) in PREFILL_CHECKS
    evidence = Evidence.model_validate_json(get_object(pool.kubo, bytes(log["args"]["evidenceDigest"])))
    spot = evidence.spot_check
    block_hash = bytes(pool.w3.eth.get_block(cheat_block + 1)["hash"])
    randomness = spot_check_randomness(block_hash, cheat_id)
    assert (spot.submission_block, spot.block_hash, spot.randomness) == (cheat_block, hex_text(block_hash),
                                                                         hex_text(randomness))
    assert (spot.n, spot.m, spot.spot_check_bps) == (N, M, 2_500)
    assert spot.indices == spot_check_indices(randomness, N, 2_500) == evidence.failing_samples


def test_a_floor_of_checked_tokens_prefills_past_q_n_and_the_evidence_re_derives_the_draw(pool):
    """docs/protocol.md R8.6 on the real checker: a pool whose run spec sets a floor of 20 checked tokens (files of
    8 completions of ≤ 8 tokens, q = 1/4) prefills the draw's prefix that holds the floor, and a caught file's
    evidence carries the floor and the lengths the explorer re-derives the draw from."""
    floor = 20
    spec = SPEC.model_copy(update={"verification": SPEC.verification.model_copy(
        update={"min_checked_tokens": floor})})
    config = pool.config.model_copy(update={"task": hex_text(publish_run_spec(pool.kubo, spec))})
    pool_id = create_pool(pool.ledger(1), config, spec)
    worker = pool.ledger(4)
    worker.ensure_allocation(pool_id, config.min_stake)
    worker.pool.join_pool(pool_id)
    binding = next_binding(worker, pool_id)
    honest = make_batch(pool.policy, spec, binding)
    cheat = fabricate_completions(pool.policy, spec, honest, range(N))
    checker = RolloutChecker(pool.anvil.rpc_url, str(pool.deployments), pool.kubo_api, pool_id,
                             pool.tmp / "floor" / "cache")
    block_hash = keccak(b"block B + 1 of the floor's file")
    sub = Submission(binding.work_id, pool_id, binding.worker, 0, N, 0, b"\x00" * 32, spot_block=7,
                     spot_block_hash=block_hash,
                     seed_block=worker.pool.get_member(pool_id, binding.worker).pinned_block)
    randomness = spot_check_randomness(block_hash, binding.work_id)
    for batch, accepted in ((honest, True), (cheat, False)):
        lengths = [len(s.completion_ids) for s in batch.samples]
        outcome = checker.check(sub, encode_rollouts(batch))
        assert outcome.ok is accepted
        indices = spot_check_indices(randomness, N, 2_500, lengths, floor)
        assert outcome.spot_check["indices"] == indices and len(indices) >= M
        assert outcome.checked_tokens == sum(lengths[i] for i in indices) >= min(floor, sum(lengths))
        assert outcome.spot_check["completion_tokens"] == lengths
        draw = verify_draw(outcome.spot_check, hex_text(binding.work_id))
        assert draw.verified is True and draw.min_checked_tokens == floor
