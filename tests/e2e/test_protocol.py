"""The whole protocol on a real anvil + Kubo with a real (tiny) policy: honest work is accepted and
trained on exactly once; every adversary is challenged and slashed."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from adversaries.workers import ATTACKS, cycling, selective_upload
from ledger_client.chain import errors
from ledger_client.chain.queries import get_work, next_binding, pool_state
from inference.tiny import TINY_SORT_SPEC as SPEC
from ledger_client.ipfs.content import publish_run_spec, put_object
from protocol.digest import Digest, WorkId
from protocol.pool import WorkStatus
from protocol.rollouts import decode_rollouts, encode_rollouts
from protocol.verdicts import Reason
from tests.support.protocol_pool import ProtocolPool
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.ledger_source import LedgerSource
from trainer.publish import base_checkpoint_digest
from worker.account import stake_for_next_submission
from worker.daemon import WorkerDaemon

EXPECTED = {
    "fabricated_rewards": {Reason.REWARD},
    "cherry_picked_prompts": {Reason.ASSIGNMENT},
    "tampered_completion": {Reason.TERMINATION, Reason.SAMPLING, Reason.TOPLOC},
    "wrong_temperature": {Reason.SAMPLING},
    "greedy_decoding": {Reason.SAMPLING},
    "other_weights": {Reason.SAMPLING, Reason.TOPLOC, Reason.TERMINATION},
    "perturbed_weights": {Reason.SAMPLING, Reason.TOPLOC, Reason.TERMINATION},
    "corrupted_proofs": {Reason.TOPLOC},
    "truncated_completion": {Reason.TERMINATION},
    "withheld": {Reason.UNAVAILABLE},
    "hostile_answers": {Reason.REWARD},
}


class Protocol(ProtocolPool):
    """The pool of SPEC, starting from a warm-started tiny policy."""

    def __init__(self, tmp: Path, kubo_node):
        super().__init__(tmp, kubo_node)
        # a short warm start: the policy emits answers of varying length and EOS, so groups are informative
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=40, warm_lr=3e-3)
        base = base_checkpoint_digest(self.kubo, model.state_dict(), model.config, tokenizer)
        self.create(SPEC, publish_run_spec(self.kubo, SPEC), base)


@pytest.fixture(scope="module")
def protocol(tmp_path_factory, kubo_node):
    p = Protocol(tmp_path_factory.mktemp("protocol"), kubo_node)
    yield p
    p.close()


def _work_ids(daemon: WorkerDaemon) -> list[bytes]:
    return [bytes.fromhex(e["work_id"]) for e in daemon.journal.entries("submitted")]


def _submit_as_next(protocol, i: int, step: int, data: bytes, n_samples: int) -> bytes:
    """Worker i uploads `data` and submits it with its next nonce (allocation topped up); returns the work id."""
    ledger = protocol.ledger(i)
    stake_for_next_submission(ledger, protocol.pool_id, protocol.config.min_stake, protocol.config.slash_amount)
    nonce = ledger.pool.get_member(protocol.pool_id, ledger.address).next_nonce
    ledger.pool.submit_work(protocol.pool_id, step, nonce, put_object(protocol.kubo, data), n_samples)
    return bytes(ledger.pool.work_id_of(protocol.pool_id, ledger.address, nonce))


def _judge(protocol, name: str) -> None:
    validator = protocol.validator(name)
    try:
        validator.run_once()
    finally:
        validator.close()


def _reason(protocol, work_id: bytes) -> Reason | None:
    logs = protocol.ledger(0).pool.contract.events.WorkChallenged.get_logs(from_block=0,
                                                                          argument_filters={"workId": work_id})
    return Reason(logs[0]["args"]["reasonCode"]) if logs else None


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

    (honest_work,) = _work_ids(honest)
    assert get_work(protocol.ledger(0), honest_work).status == WorkStatus.ACCEPTED
    logs = protocol.ledger(0).pool.contract.events.WorkChallenged.get_logs(from_block=0)
    reasons = {bytes(l["args"]["workId"]): Reason(l["args"]["reasonCode"]) for l in logs}
    matrix = Counter()
    for entry, name in zip(adversary.journal.entries("submitted"), attacks.used, strict=True):
        reason = reasons.get(bytes.fromhex(entry["work_id"]))
        matrix[(name, reason.name if reason else "ACCEPTED")] += 1
        assert reason in EXPECTED[name], f"{name}: {reason}"
    print("\nattack → verdict:", dict(matrix))
    # Every open work was backed by a full slash (the daemon keeps (k + 1) × 50 allocated before each submission,
    # topping up for ALLOCATE_AHEAD submissions at once), so each challenge took the whole 50: what is left of the
    # allocation is what was allocated less the slashes.
    adversary_address = protocol.accounts[5].address
    slashes = protocol.ledger(0).stake.contract.events.Slashed.get_logs(from_block=0,
                                                                        argument_filters={"worker": adversary_address})
    assert [e["args"]["amount"] for e in slashes] == [protocol.config.slash_amount] * len(ATTACKS)
    member = protocol.ledger(0).pool.get_member(protocol.pool_id, adversary_address)
    allocated = protocol.ledger(0).pool.contract.events.StakeAllocated.get_logs(
        from_block=0, argument_filters={"poolId": protocol.pool_id, "worker": adversary_address})
    assert member.open_works == 0
    assert member.allocation == sum(e["args"]["amount"] for e in allocated) - len(ATTACKS) * protocol.config.slash_amount

    source = LedgerSource(protocol.ledger(2), protocol.kubo, protocol.pool_id, wait_final=False)
    items = source.poll()
    assert [i.id for i in items] == [WorkId(honest_work).text]
    assert source.poll() == []
    restarted = LedgerSource(protocol.ledger(2), protocol.kubo, protocol.pool_id, wait_final=False)
    restarted.restore(source.state())
    assert restarted.poll() == []


def test_a_replayed_file_is_challenged_whatever_nonce_it_names(protocol):
    """Item 7 of issue 12: the same completions submitted again (under a new digest) are never paid twice."""
    honest = protocol.worker(4)
    entry = honest.journal.entries("submitted")[0]
    data = Path(entry["file"]).read_bytes()
    batch = decode_rollouts(data)
    replay = _submit_as_next(protocol, 4, entry["step"], data, len(batch.samples))  # the same bytes, next nonce
    after = next_binding(protocol.ledger(4), protocol.pool_id)  # the nonce after, and its pin
    renonced = batch.header.model_copy(update={"nonce": after.nonce, "seed_block_hash": after.seed_block_hash})
    relabelled = _submit_as_next(protocol, 4, entry["step"], encode_rollouts(batch.model_copy(update={"header": renonced})),
                                 len(batch.samples))
    _judge(protocol, "validator-replay")
    assert _reason(protocol, replay) == Reason.WRONG_BINDING
    assert _reason(protocol, relabelled) == Reason.ASSIGNMENT  # the nonce's prompts are other prompts


def test_stale_and_reused_nonce_submissions_are_refused_on_chain(protocol):
    worker = protocol.worker(6)
    stop = threading.Event()
    worker.step_once(stop)
    (work_id,) = _work_ids(worker)
    digest = bytes.fromhex(worker.journal.entries("submitted")[0]["digest"])
    # A nonce is used once (this was DuplicateWork of a digest; another worker's file is now refused off-chain).
    with pytest.raises(errors.InvalidNonce):
        protocol.ledger(6).pool.submit_work(protocol.pool_id, 0, 0, digest, 8)
    trainer = protocol.ledger(2)
    for step in (1, 2, 3):
        trainer.pool.publish_checkpoint(protocol.pool_id, step, bytes([step]) * 32)
    with pytest.raises(errors.StepNotContiguous):
        trainer.pool.publish_checkpoint(protocol.pool_id, 5, b"\x05" * 32)
    with pytest.raises(errors.StaleStep):  # step 0 is older than the async level (2) allows
        protocol.ledger(6).pool.submit_work(protocol.pool_id, 0, 1, b"\x77" * 32, 8)
    with pytest.raises(errors.TooManySamples):  # the run spec's submission is 2 prompts × 4 samples
        protocol.ledger(6).pool.submit_work(protocol.pool_id, 3, 1, b"\x77" * 32, 9)
    assert get_work(protocol.ledger(0), work_id).nonce == 0


def test_a_worker_holds_one_valid_file_per_nonce(protocol):
    """Issue 26 item 4 (grinding): under rule v2 a worker made its file at every step the async level allowed and
    submitted the best. Now the chain pins the nonce's step and the pinning block's hash seeds the file: every other
    step is refused on chain, a file seeded by another block is refused off-chain, and a usable nonce cannot be
    dropped for a fresh draw."""
    ledger, pool_id = protocol.ledger(4), protocol.pool_id
    state = pool_state(ledger, pool_id)
    if state.latest_step - ledger.pool.get_member(pool_id, ledger.address).pinned_step > state.async_level:
        ledger.pool.skip_nonce(pool_id)  # its pin went stale while other tests published steps
    with pytest.raises(errors.PinNotStale):
        ledger.pool.skip_nonce(pool_id)
    pinned = next_binding(ledger, pool_id)
    n = 2 * 4
    stake_for_next_submission(ledger, pool_id, protocol.config.min_stake, protocol.config.slash_amount)
    usable = range(max(0, state.latest_step - state.async_level), state.latest_step + 1)
    assert len(usable) == 3 and pinned.step in usable
    for step in usable:
        if step != pinned.step:
            with pytest.raises(errors.StepNotPinned):
                ledger.pool.submit_work(pool_id, step, pinned.nonce, b"\x99" * 32, n)
    batch = decode_rollouts(Path(protocol.worker(4).journal.entries("submitted")[0]["file"]).read_bytes())
    protocol.w3.provider.make_request("evm_mine", [])
    later_block = Digest(bytes(protocol.w3.eth.get_block("latest")["hash"]))  # as if the pin had come later
    assert later_block != pinned.seed_block_hash
    header = batch.header.model_copy(update={"policy_step": pinned.step, "nonce": pinned.nonce,
                                             "seed_block_hash": later_block})
    timed = _submit_as_next(protocol, 4, pinned.step, encode_rollouts(batch.model_copy(update={"header": header})), n)
    _judge(protocol, "validator-pins")
    assert _reason(protocol, timed) == Reason.WRONG_BINDING


def test_another_workers_file_rewritten_as_own_is_challenged(protocol, tmp_path):
    honest = protocol.worker(4)
    batch = decode_rollouts(Path(honest.journal.entries("submitted")[0]["file"]).read_bytes())
    thief = protocol.accounts[6].address
    thief_ledger, state = protocol.ledger(6), pool_state(protocol.ledger(0), protocol.pool_id)
    if state.latest_step - thief_ledger.pool.get_member(protocol.pool_id, thief).pinned_step > state.async_level:
        thief_ledger.pool.skip_nonce(protocol.pool_id)  # its pin went stale while other tests ran
    step = next_binding(thief_ledger, protocol.pool_id).step
    # Declared as the thief's own and for the current step so the chain takes it; the validator must refuse it.
    header = batch.header.model_copy(update={"worker": thief, "policy_step": step})
    work_id = _submit_as_next(protocol, 6, step, encode_rollouts(batch.model_copy(update={"header": header})),
                              len(batch.samples))
    _judge(protocol, "validator-2")
    assert get_work(protocol.ledger(0), work_id).status == WorkStatus.REJECTED
