"""The trainer's two consumption modes on a real anvil + Kubo (issue 13, item 4), in a permissioned pool whose
second validator overrules the first within the challenge window:

- final (`--wait-final`, the default on every chain): nothing is consumed before the challenge window has
  passed, then only what is still accepted — the overruled submission never reaches the trainer;
- fast (`--no-wait-final`, an explicit opt-in): both are consumed at their attestation, and the overruled one is counted
  in `overturned` once it is rejected; the count survives a restart through the checkpointed state.

Staleness is counted when the trainer takes a file, so the wait for finality is in it and the async level drops a
file that waited too long (the last test).

The court-pool side (finality = the court's final verdict) runs in tests/e2e/test_court_validators.py."""

from __future__ import annotations

import copy
import random

import pytest

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import create_pool
from ledger_client.chain.ledger import Ledger, connect
from ledger_client.chain.queries import next_binding, pool_state
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import WorkId, hex_text
from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample, encode_rollouts
from protocol.runspec import RunSpec, SamplingSpec
from tests.support.conftest_chain import TOKENS, pool_config
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec, TrainerConfig
import trainer.ledger_source as ledger_source
from trainer.ledger_source import LedgerSource
from trainer.loop import Trainer
from trainer.work_source import InMemorySource
from trainer.publish import base_checkpoint_digest
from worker.policy import Policy
from worker.produce import make_batch

SPEC = RunSpec(task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}},
               sampling=SamplingSpec(group_size=2, temperature=1.0, max_tokens=6), prompts_per_submission=1,
               pool_seed="0x" + "7f" * 32)
WINDOW_S = 600
WORKER, FIRST_VALIDATOR, SECOND_VALIDATOR = 4, 3, 8


@pytest.fixture(scope="module")
def pool(tmp_path_factory, kubo_node):
    tmp = tmp_path_factory.mktemp("finality")
    anvil = start_anvil(tmp / "anvil.log")
    w3 = connect(anvil.rpc_url, 31337)
    accounts = dev_accounts(10)
    deployment = deploy_contracts(w3, accounts[0])
    ledger = lambda i: Ledger(w3, deployment, accounts[i])  # noqa: E731
    for i in (1, WORKER):
        ledger(0).token.mint(accounts[i].address, 10**6 * TOKENS)
    kubo = KuboClient(kubo_node.api_multiaddr)
    model, tokenizer = init_policy(SPEC, ModelSpec(hidden=16, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
    base = base_checkpoint_digest(kubo, model.state_dict(), model.config, tokenizer)
    config = pool_config(accounts, validators=[accounts[FIRST_VALIDATOR].address, accounts[SECOND_VALIDATOR].address],
                         challenge_window_s=WINDOW_S, reward_lock_s=WINDOW_S + 1, max_samples_per_work=None,
                         task=hex_text(publish_run_spec(kubo, SPEC)), base_checkpoint=hex_text(base))
    pool_id = create_pool(ledger(1), config, SPEC)
    worker = ledger(WORKER)
    worker.ensure_allocation(pool_id, 3 * config.slash_amount)
    worker.pool.join_pool(pool_id)
    policy = Policy(0, base, copy.deepcopy(model), tokenizer)

    def submit() -> bytes:
        """One file made with policy 0, submitted; its work id."""
        binding = next_binding(worker, pool_id)
        data = encode_rollouts(make_batch(policy, SPEC, binding))
        worker.pool.submit_work(pool_id, binding.step, binding.nonce, put_object(kubo, data),
                                SPEC.prompts_per_submission * SPEC.sampling.group_size)
        return binding.work_id

    works = [submit(), submit()]
    yield ledger, kubo, pool_id, works, submit, model
    kubo.close()
    anvil.stop()


def test_final_mode_waits_out_the_window_and_fast_mode_counts_what_was_overturned(pool):
    ledger, kubo, pool_id, (kept, overruled), _, _ = pool
    trainer = ledger(2)
    fast = LedgerSource(trainer, kubo, pool_id, wait_final=False)
    final = LedgerSource(trainer, kubo, pool_id, wait_final=True)
    for work_id in (kept, overruled):
        ledger(FIRST_VALIDATOR).pool.attest(work_id)
    assert sorted(i.id for i in fast.poll()) == sorted(WorkId(w).text for w in (kept, overruled))
    assert final.poll() == [] and len(final.pending) == 2  # attested, but a challenge could still overrule them
    ledger(SECOND_VALIDATOR).pool.challenge(overruled, 7, b"\x01" * 32)
    assert fast.poll() == [] and fast.overturned == [WorkId(overruled).text] and fast.unsettled == [WorkId(kept).text]
    assert final.poll() == []
    trainer.w3.provider.make_request("evm_increaseTime", [WINDOW_S + 1])
    trainer.w3.provider.make_request("evm_mine", [])
    assert [i.id for i in final.poll()] == [WorkId(kept).text]
    assert final.skipped == [WorkId(overruled).text] and final.overturned == [] and final.unsettled == []
    assert fast.poll() == [] and fast.unsettled == []  # the kept one is final now: settled, not overturned
    restarted = LedgerSource(trainer, kubo, pool_id, wait_final=False)
    restarted.restore(fast.state())
    assert restarted.poll() == [] and restarted.overturned == [WorkId(overruled).text]


class BothSources:
    """The ledger's final work, and files handed in directly (to move the trainer on while the ledger's wait)."""

    def __init__(self, ledger_source: LedgerSource, direct: InMemorySource):
        self.ledger_source, self.direct = ledger_source, direct

    def poll(self):
        return self.ledger_source.poll() + self.direct.poll()

    def state(self):
        return {}

    def restore(self, state):
        pass

    def report(self, step, waiting):
        pass


def _informative_file(seed: int, policy_step: int) -> RolloutBatch:
    """One group of the pool's sampling, rewards 0 and 1 (so it is trained on), made with `policy_step`."""
    rng = random.Random(seed)
    header = RolloutHeader(chain_id=0, pool_contract="0x" + "00" * 20, pool_id=0, nonce=seed, policy_step=policy_step,
                           manifest_digest="0x" + "00" * 32, worker="0x" + "ab" * 20, task=SPEC.task,
                           sampling=SPEC.sampling, proof_chunk=0)
    prompt = [rng.randrange(4, 10) for _ in range(3)]
    samples = [RolloutSample(group=0, sample=s, prompt_index=0, prompt_ids=prompt,
                             completion_ids=[rng.randrange(4, 10) for _ in range(3)], logprobs=[-1.0] * 3,
                             reward=float(s), finish_reason="length", seed=s, proofs=[]) for s in range(2)]
    return RolloutBatch(header=header, samples=samples)


def test_the_wait_for_finality_counts_in_staleness_and_the_async_level_bounds_it(pool, tmp_path):
    """A file made with policy 0 and attested at once is final only after the challenge window; meanwhile the
    trainer (async level 1) steps twice on other work. Taken at step 2, it is two steps stale: dropped, not
    trained on — staleness is counted when the trainer takes a file, so the finality wait is in it."""
    ledger, kubo, pool_id, _, submit, model = pool
    snapshot = ledger(0).w3.provider.make_request("evm_snapshot", [])["result"]
    try:
        work = WorkId(submit()).text
        ledger(FIRST_VALIDATOR).pool.attest(bytes.fromhex(work[2:]))
        final, direct = LedgerSource(ledger(2), kubo, pool_id, wait_final=True), InMemorySource()
        config = TrainerConfig(run_dir=tmp_path, sampling=SPEC.sampling, batch_samples=2, async_level=1, max_steps=5,
                               wait_timeout_s=5, poll_interval_s=0.01)
        trainer = Trainer(config, copy.deepcopy(model), BothSources(final, direct))
        trainer.start()
        for step in (0, 1):
            direct.put(f"fresh{step}", _informative_file(step, policy_step=step))
            assert trainer.train_step().dropped_stale_groups == 0
            assert final.pending == [work] and work not in final.consumed  # attested, not final yet
        ledger(0).w3.provider.make_request("evm_increaseTime", [WINDOW_S + 1])
        ledger(0).w3.provider.make_request("evm_mine", [])
        direct.put("fresh2", _informative_file(2, policy_step=2))
        third = trainer.train_step()
        assert work in final.consumed
        assert third.dropped_stale_groups == SPEC.prompts_per_submission  # its one group, policy 0 at step 2
        assert third.submission_staleness == [0]  # only the fresh file was trained on
    finally:
        ledger(0).w3.provider.make_request("evm_revert", [snapshot])


def test_an_accepted_file_nobody_serves_is_tried_again_ever_later_not_every_poll(pool, monkeypatch):
    """A withheld file an accepting verdict let through: each fetch try waits out the timeout and holds up the poll's
    other files, so the trainer tries it again after 10 s, 20 s, … (never dropping it: it may yet be served)."""
    import trainer.ledger_source as ledger_source

    ledger, kubo, pool_id, _, _, _ = pool
    worker, trainer = ledger(WORKER), ledger(2)
    binding = next_binding(worker, pool_id)
    worker.pool.submit_work(pool_id, binding.step, binding.nonce, b"\xee" * 32, 2)  # never uploaded
    ledger(FIRST_VALIDATOR).pool.attest(binding.work_id)
    trainer.w3.provider.make_request("evm_increaseTime", [WINDOW_S + 1])
    trainer.w3.provider.make_request("evm_mine", [])
    tries = []
    real_get = ledger_source.get_object
    monkeypatch.setattr(ledger_source, "get_object",
                        lambda kubo, digest, **k: tries.extend([1] if bytes(digest) == b"\xee" * 32 else [])
                        or real_get(kubo, digest, **k))
    source = LedgerSource(trainer, kubo, pool_id, fetch_timeout_s=0.5, wait_final=True)
    work = WorkId(binding.work_id).text
    ours = lambda: [i for i in source.poll() if i.id == work]  # noqa: E731 - other tests' files are consumable too
    assert ours() == [] and len(tries) == 1 and work in source.pending
    assert ours() == [] and len(tries) == 1  # within the 10 s: not asked again
    assert source._unfetched[work][1] == ledger_source.UNFETCHED_RETRY_S
    source._unfetched[work] = (0.0, source._unfetched[work][1])  # as if the 10 s had passed
    assert ours() == [] and len(tries) == 2 and source._unfetched[work][1] == 2 * ledger_source.UNFETCHED_RETRY_S


def test_a_files_digest_comes_from_its_submission_event_and_is_looked_up_only_after_a_restart(pool, monkeypatch):
    ledger, kubo, pool_id, _, submit, _ = pool
    trainer = ledger(2)
    looked_up: list[bytes] = []
    real_lookup = ledger_source.rollout_digest_of
    monkeypatch.setattr(ledger_source, "rollout_digest_of", lambda l, w: looked_up.append(w) or real_lookup(l, w))
    ledger(WORKER).ensure_allocation(pool_id, 10 * pool_state(trainer, pool_id).slash_amount)  # two more open files
    source = LedgerSource(trainer, kubo, pool_id, wait_final=False)
    first = submit()
    ledger(FIRST_VALIDATOR).pool.attest(first)
    assert WorkId(first).text in [i.id for i in source.poll()] and looked_up == []  # read with the acceptance
    second = submit()
    assert source.poll() == []  # its submission event seen, not accepted yet
    restarted = LedgerSource(trainer, kubo, pool_id, wait_final=False)
    restarted.restore(source.state())  # past that event: the digest is not in memory any more
    ledger(FIRST_VALIDATOR).pool.attest(second)
    items = restarted.poll()
    assert [i.id for i in items] == [WorkId(second).text] and second in looked_up
    assert len(items[0].batch.samples) == SPEC.prompts_per_submission * SPEC.sampling.group_size
