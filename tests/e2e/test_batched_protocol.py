"""A permissioned pool that settles its files in batches (docs/protocol.md §3.1) on a real anvil + Kubo with a real
(tiny) policy: the worker daemon makes each file a leaf of the epoch seeded by its beacon, signs runs of them, posts its
own batches and, once the window has closed, claims them by range proof; a kill -9 between any two of those steps
resumes without posting or claiming twice; the validator daemon voids a batch whose list is missing or foreign and
challenges a bad leaf in the window; the trainer takes each final leaf once, never a voided one. The chain's clock
moves by mined timestamps, never by waiting."""

from __future__ import annotations

import json
import threading

import pytest

from adversaries.workers import attack_file
from deploy.pools import BatchesConfig
from inference.tiny import TINY_SORT_SPEC as SPEC
from ledger_client.chain import batches as batches_lib
from ledger_client.chain.batches import runs_of_list
from ledger_client.ipfs.content import get_object, publish_run_spec, put_object
from protocol.batchlist import BatchList, decode_batch_list, encode_batch_list
from protocol.rollouts import decode_rollouts
from protocol.digest import WorkId
from protocol.submission import leaf_binding, leaf_nonce
from protocol.verdicts import Reason
from tests.support.conftest_chain import TOKENS
from tests.support.protocol_pool import ProtocolPool
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.ledger_source import LedgerSource
from trainer.publish import base_checkpoint_digest
from worker.cli import main as worker_main
from worker.produce import produce_rollout_file

EPOCH, MAX_LEAVES, WINDOW = 600, 4, 3600
BOND = 50 * TOKENS * MAX_LEAVES * (2 + WINDOW // EPOCH)  # R1.25 at the least


class Batched(ProtocolPool):
    """The pool of SPEC with a `[pool.batches]` table, from a warm-started tiny policy."""

    def __init__(self, tmp, kubo_node):
        super().__init__(tmp, kubo_node)
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=40, warm_lr=3e-3)
        base = base_checkpoint_digest(self.kubo, model.state_dict(), model.config, tokenizer)
        self.create(SPEC, publish_run_spec(self.kubo, SPEC), base,
                    batches=BatchesConfig(epoch_length_s=EPOCH, max_leaves=MAX_LEAVES, worker_bond=BOND,
                                          budget_funding=10_000 * TOKENS))
        self.wb = self.ledger(1).batches

    def jump(self, seconds: int) -> int:
        """Mine a block `seconds` after the latest; returns its timestamp."""
        t = self.w3.eth.get_block("latest")["timestamp"] + seconds
        self.w3.provider.make_request("evm_mine", [t])
        return t

    def to_next_epoch(self) -> None:
        now = self.w3.eth.get_block("latest")["timestamp"]
        genesis = self.wb.genesis_of(self.pool_id)
        self.jump(EPOCH - (now - genesis) % EPOCH + 1)

    def posted(self, worker: str | None = None) -> list:
        events = self.ledger(0).logs.read(self.wb.contract.events.BatchPosted, {"poolId": self.pool_id},
                                          self.deployment.block)
        return [e["args"] for e in events if worker is None or e["args"]["poster"] == worker]


@pytest.fixture(scope="module")
def batched(tmp_path_factory, kubo_node):
    p = Batched(tmp_path_factory.mktemp("batched"), kubo_node)
    yield p
    p.close()


def test_an_honest_workers_leaves_are_posted_by_itself_and_claimed_after_the_window(batched):
    stop = threading.Event()
    worker = batched.worker(4, per_step=3, run_leaves=2)
    me = worker.ledger.address
    assert batched.wb.get_bond(batched.pool_id, me).locked == BOND
    assert not worker.step_once(stop)  # the bond counts from the next epoch: nothing made before it
    batched.to_next_epoch()
    epoch = batched.wb.epoch_of(batched.pool_id, batched.w3.eth.get_block("latest")["timestamp"])
    assert worker.step_once(stop) and worker.step_once(stop)  # two leaves: a run of two, signed and posted
    (first,) = batched.posted(me)
    assert first["epoch"] == epoch and first["count"] == 1
    assert worker.step_once(stop)  # the third leaf waits for a full run ...
    assert len(batched.posted(me)) == 1
    assert not worker.step_once(stop)  # ... until the step's files are made: then it is posted alone
    second = batched.posted(me)[1]

    runs = runs_of_list(decode_batch_list(get_object(batched.kubo, bytes(second["listDigest"]))), batched.wb
                        .domain_separator())
    (run,) = runs
    assert run.first_counter == 2 and run.worker == me
    header = decode_rollouts(get_object(batched.kubo, run.leaves[0].rollout_digest)).header
    assert header.pool_contract == batched.wb.address and header.nonce == leaf_nonce(epoch, 2)
    assert bytes(header.seed_block_hash) == bytes(batched.wb.beacon_of(batched.pool_id, epoch))  # R3.9

    assert worker.maybe_claim(force=True) == 0  # the windows are open
    batched.jump(WINDOW + 1)
    before = batched.ledger(0).token.balance_of(me)
    paid = worker.maybe_claim(force=True)
    samples = SPEC.prompts_per_submission * SPEC.sampling.group_size
    assert paid == 3 * samples * batched.config.reward_per_sample
    assert batched.ledger(0).token.balance_of(me) - before == paid
    assert tuple(batched.wb.next_claim(batched.pool_id, me)) == (epoch, 3)
    assert worker.maybe_claim(force=True) == 0  # paid once
    worker.lock.release()


class Killed(BaseException):
    """A kill -9 at that line: nothing after it runs, nothing in the process survives but its files."""


def test_a_killed_worker_resumes_without_posting_twice_or_reusing_a_counter(batched):
    stop = threading.Event()
    w = batched.worker(5, per_step=2, run_leaves=2)
    me = w.ledger.address
    batched.to_next_epoch()  # the bond's first epoch
    post = w.batched.wb.post_batch

    def posted_then_killed(ref):
        post(ref)
        raise Killed
    w.batched.wb.post_batch = posted_then_killed
    assert w.step_once(stop)
    with pytest.raises(Killed):  # leaf 1 made, the run of 0..1 signed, listed and posted: killed before it is journaled
        w.step_once(stop)
    w.lock.release()

    again = batched.worker(5, per_step=3, run_leaves=2)
    assert len(batched.posted(me)) == 1
    upload = again.batched.upload

    def killed_uploading(kubo, data):
        raise Killed
    again.batched.upload = killed_uploading
    with pytest.raises(Killed):  # leaf 2 journaled, killed before it reached Kubo
        again.step_once(stop)
    again.batched.upload = upload
    again.lock.release()

    last = batched.worker(5, per_step=3, run_leaves=2)
    assert not last.step_once(stop)  # the step's three files are made: leaf 2 uploaded, signed and posted
    posted = batched.posted(me)
    assert len(posted) == 2  # the first batch was found on the chain, not posted again
    lists = [decode_batch_list(get_object(batched.kubo, bytes(p["listDigest"]))) for p in posted]
    assert [(r.first_counter, len(r.leaves)) for bl in lists for r in bl.runs] == [(0, 2), (2, 1)]
    leaf = lists[1].runs[0].leaves[0]
    assert decode_rollouts(get_object(batched.kubo, leaf.rollout_digest)).header.nonce & 0xFFFFFFFF == 2
    batched.jump(WINDOW + 1)
    samples = SPEC.prompts_per_submission * SPEC.sampling.group_size
    assert last.maybe_claim(force=True) == 3 * samples * batched.config.reward_per_sample
    last.lock.release()


def _one_bad_leaf(bad_counter: int):
    """An honest producer but for the leaf of counter `bad_counter`, whose rewards are fabricated (every completion
    claimed solved)."""
    def produce(policy, spec, binding):
        if binding.nonce & 0xFFFFFFFF == bad_counter:
            _, data, n = attack_file("fabricated_rewards", policy, spec, binding)
            return data, n
        return produce_rollout_file(policy, spec, binding)
    return produce


def test_a_bad_leaf_is_challenged_in_the_window_its_worker_slashed_and_the_rest_claimed(batched):
    stop = threading.Event()
    w = batched.worker(6, _one_bad_leaf(1), per_step=3, run_leaves=3)
    me = w.ledger.address
    batched.to_next_epoch()
    epoch = batched.wb.epoch_of(batched.pool_id, batched.w3.eth.get_block("latest")["timestamp"])
    while w.step_once(stop):
        pass
    assert len(batched.posted(me)) == 1
    validator = batched.validator("batch-validator")
    try:
        assert validator.run_once() == 1  # one challenge; the good leaves need no transaction
    finally:
        validator.close()
    assert batched.wb.is_void(batched.pool_id, me, epoch, 1)
    assert not batched.wb.is_void(batched.pool_id, me, epoch, 0) and not batched.wb.is_void(batched.pool_id, me, epoch, 2)
    assert batched.wb.get_bond(batched.pool_id, me).locked == BOND - batched.config.slash_amount
    (voided,) = batched.ledger(0).logs.read(batched.wb.contract.events.LeafVoided, {"poolId": batched.pool_id,
                                                                                    "worker": me}, batched.deployment.block)
    assert voided["args"]["reasonCode"] == int(Reason.REWARD) and voided["args"]["counter"] == 1
    verdicts = [json.loads(line) for line in (batched.tmp / "batch-validator" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(v["verdict"] for v in verdicts) == ["accepted", "accepted", "challenged"]

    trainer = LedgerSource(batched.ledger(2), batched.kubo, batched.pool_id)
    assert not [i for i in trainer.poll() if i.batch.header.worker == me]  # not final while the window is open
    batched.jump(WINDOW + 1)
    beacon = bytes(batched.wb.beacon_of(batched.pool_id, epoch))

    def leaf_id(counter: int) -> str:
        return WorkId(leaf_binding(31337, batched.wb.address, batched.pool_id, me, 0, epoch, counter, beacon).work_id).text
    taken = {i.id: i.batch for i in trainer.poll()}
    assert {leaf_id(0), leaf_id(2)} <= set(taken) and leaf_id(1) not in taken  # the final leaves, not the voided one
    assert all(b.header.pool_contract == batched.wb.address for b in taken.values())
    assert trainer.poll() == []  # each once
    trainer.close()
    samples = SPEC.prompts_per_submission * SPEC.sampling.group_size
    assert w.maybe_claim(force=True) == 2 * samples * batched.config.reward_per_sample  # counters 0 and 2
    assert tuple(batched.wb.next_claim(batched.pool_id, me)) == (epoch, 3)
    assert batched.wb.get_bond(batched.pool_id, me).locked == BOND  # topped up after the slash
    w.lock.release()


def test_a_batch_whose_list_is_missing_or_foreign_is_voided(batched):
    poster = batched.ledger(4).batches
    batched.to_next_epoch()
    poster.open_epoch(batched.pool_id)
    epoch = batched.wb.epoch_of(batched.pool_id, batched.w3.eth.get_block("latest")["timestamp"])
    missing = (batched.pool_id, epoch, 1, b"\x01" * 32, b"\x02" * 32)  # no list on IPFS under that digest
    foreign = (batched.pool_id, epoch, 1, b"\x03" * 32, put_object(batched.kubo, b"PSBL not a list"))
    for ref in (missing, foreign):
        poster.post_batch(ref)
    validator = batched.validator("void-validator", fetch_timeout_s=2.0)
    try:
        validator.run_once()
    finally:
        validator.close()
    for ref in (missing, foreign):
        assert batched.wb.batch_of(batched.wb.batch_id_of(ref)).voided


def test_a_leaf_posted_after_its_step_went_stale_is_challenged_stale(batched):
    """Last in the module: it moves the pool's latest step past the async level."""
    stop = threading.Event()
    w = batched.worker(4, per_step=5, run_leaves=8)
    me = w.ledger.address
    batched.to_next_epoch()
    epoch = batched.wb.epoch_of(batched.pool_id, batched.w3.eth.get_block("latest")["timestamp"])
    assert w.step_once(stop)  # leaf 0 on step 0, held for a run of 8
    trainer = batched.ledger(2)
    manifest = bytes(trainer.pool.checkpoint_at(batched.pool_id, 0))
    for step in range(1, batched.config.async_level + 2):
        trainer.pool.publish_checkpoint(batched.pool_id, step, manifest)
    w.batched.post(epoch, all_leaves=True)  # posted with step 3 out: step 0 is more than the async level behind
    validator = batched.validator("stale-validator")
    try:
        validator.run_once()
    finally:
        validator.close()
    (voided,) = batched.ledger(0).logs.read(batched.wb.contract.events.LeafVoided,
                                            {"poolId": batched.pool_id, "worker": me, "epoch": epoch},
                                            batched.deployment.block)
    assert voided["args"]["reasonCode"] == int(Reason.STALE) and voided["args"]["counter"] == 0
    w.lock.release()


def test_worker_deallocate_batch_bond_exits_then_unlocks_after_the_last_window(batched, capsys):
    me = batched.accounts[5]
    cli = ["deallocate", "--pool", str(batched.pool_id), "--batch-bond", "--rpc-url", batched.anvil.rpc_url,
           "--deployments", str(batched.deployments), "--key", me.key.to_0x_hex(), "--json"]
    free = batched.ledger(5).stake.bonded_of(me.address)
    assert worker_main(cli) == 0
    asked = json.loads(capsys.readouterr().out)
    assert asked["exit_requested"] is True and int(asked["batch_bond"]) == BOND
    assert worker_main(cli) != 0  # not yet: one line naming when
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unlocks once that epoch's batches are past their windows" in err[0]
    batched.jump(int(asked["unlockable_at"]) - batched.w3.eth.get_block("latest")["timestamp"])
    assert worker_main(cli) == 0
    assert int(json.loads(capsys.readouterr().out)["batch_bond_unlocked"]) == BOND
    assert batched.ledger(5).stake.bonded_of(me.address) == free + BOND
    assert batched.wb.get_bond(batched.pool_id, me.address).locked == 0


def test_two_posted_runs_that_give_a_counter_two_leaves_are_proven_a_duplicate(batched):
    me = batched.accounts[6]  # bonded in WorkBatches by an earlier test's daemon
    if not batched.wb.get_bond(batched.pool_id, me.address).bonded:
        batched.worker(6).lock.release()
    batched.to_next_epoch()
    ledger = batched.ledger(6)
    ledger.batches.open_epoch(batched.pool_id)
    epoch = batched.wb.epoch_of(batched.pool_id, batched.w3.eth.get_block("latest")["timestamp"])
    domain = batched.wb.domain_separator()
    refs = []
    for tag in (1, 2):  # counter 0 signed twice, with two different (fabricated) files
        run = batches_lib.sign_run(me, domain, batched.pool_id, epoch, 0, [batches_lib.LeafBody(bytes([tag]) * 32, 0, 16)])
        data = encode_batch_list(BatchList(batched.pool_id, epoch, (batches_lib.listed(run),)))
        _, ref = batches_lib.batch([run], put_object(batched.kubo, data))
        ledger.batches.post_batch(ref)
        refs.append(ref)
    before = batched.wb.get_bond(batched.pool_id, me.address).locked
    validator = batched.validator("duplicate-validator", fetch_timeout_s=2.0)
    try:
        validator.run_once()
    finally:
        validator.close()
    (voided,) = batched.ledger(0).logs.read(batched.wb.contract.events.LeafVoided,
                                            {"poolId": batched.pool_id, "worker": me.address, "epoch": epoch},
                                            batched.deployment.block)
    assert voided["args"]["duplicate"] is True and voided["args"]["counter"] == 0
    assert batched.wb.get_bond(batched.pool_id, me.address).locked == before - batched.config.slash_amount  # once
