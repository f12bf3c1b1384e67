"""The trainer scores accepted files again (protocol.rescoring, trainer/ledger_source.py `rescore`): a file whose
claimed rewards the task does not give is never trained on, even when a validator accepted it — the pool's listed
validator attesting without a check here, on a real anvil + Kubo with a real tiny policy, its tokenizer and the sort
task."""

from __future__ import annotations

import functools
import threading

from adversaries.workers import cycling
from inference.tiny import TINY_SORT_SPEC as SPEC
from ledger_client.chain.queries import get_work
from ledger_client.ipfs.content import publish_run_spec
from protocol.digest import WorkId
from protocol.pool import WorkStatus
from protocol.rescoring import misscored_samples
from tasks.registry import build_task
from tests.support.protocol_pool import ProtocolPool
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.ledger_source import LedgerSource
from trainer.publish import base_checkpoint_digest


def test_an_accepted_file_with_rewards_the_task_does_not_give_is_never_trained_on(tmp_path, kubo_node):
    pool = ProtocolPool(tmp_path, kubo_node)
    try:
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
        pool.create(SPEC, publish_run_spec(pool.kubo, SPEC),
                    base_checkpoint_digest(pool.kubo, model.state_dict(), model.config, tokenizer))
        stop = threading.Event()
        honest = pool.worker(4)
        attack = cycling(["fabricated_rewards"])
        cheat = pool.worker(5, producer=attack)
        assert honest.step_once(stop) and cheat.step_once(stop)
        assert attack.used == ["fabricated_rewards"]  # it changed the rewards (not the fallback attack)
        honest_id, cheat_id = (w.journal.entries("submitted")[0]["work_id"] for w in (honest, cheat))
        for work_id in (honest_id, cheat_id):  # a lazy (or allied) validator: attested unchecked
            pool.ledger(3).pool.attest(bytes.fromhex(work_id))
            assert get_work(pool.ledger(0), bytes.fromhex(work_id)).status == WorkStatus.ACCEPTED

        trusting = LedgerSource(pool.ledger(2), pool.kubo, pool.pool_id, wait_final=False)
        assert {i.id for i in trusting.poll()} == {WorkId(bytes.fromhex(w)).text for w in (honest_id, cheat_id)}

        rescore = functools.partial(misscored_samples, build_task(SPEC.task), tokenizer)
        source = LedgerSource(pool.ledger(2), pool.kubo, pool.pool_id, wait_final=False, rescore=rescore)
        assert [i.id for i in source.poll()] == [WorkId(bytes.fromhex(honest_id)).text]
        assert source.misscored == [WorkId(bytes.fromhex(cheat_id)).text]
        assert source.poll() == [] and len(source.consumed) == 1  # booked once, never handed out
    finally:
        pool.close()
