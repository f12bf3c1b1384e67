"""Hostile answers end to end, on a real anvil + Kubo (issue 42): in a pool whose rewards are scored in the
sandbox (a reasoning-gym task), a worker that submits the poison and code answers, each claiming reward 1, is
challenged REWARD, and an honest worker's next file is accepted by the same validator daemon."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from adversaries.workers import cycling
from ledger_client.chain.queries import get_work
from ledger_client.ipfs.content import publish_run_spec
from protocol.pool import WorkStatus
from protocol.rollouts import decode_rollouts
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.verdicts import Reason
from tests.support.protocol_pool import ProtocolPool
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest

SPEC = RunSpec(
    task={"name": "gym:products", "seed": 0, "params": {"size": 64, "test_size": 8}},
    sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=64),
    prompts_per_submission=2,
    pool_seed="0x" + "4e" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                  toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True),
)


@pytest.fixture(scope="module")
def pool(tmp_path_factory, kubo_node):
    p = ProtocolPool(tmp_path_factory.mktemp("hostile"), kubo_node)
    model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=5, warm_lr=3e-3)
    base = base_checkpoint_digest(p.kubo, model.state_dict(), model.config, tokenizer)
    p.create(SPEC, publish_run_spec(p.kubo, SPEC), base)
    yield p
    p.close()


def _reason(pool: ProtocolPool, work_id: bytes) -> Reason | None:
    logs = pool.ledger(0).pool.contract.events.WorkChallenged.get_logs(from_block=0,
                                                                       argument_filters={"workId": work_id})
    return Reason(logs[0]["args"]["reasonCode"]) if logs else None


def test_hostile_answers_are_challenged_and_the_next_honest_file_is_accepted_by_the_same_daemon(pool: ProtocolPool,
                                                                                              tmp_path: Path):
    stop = threading.Event()
    adversary = pool.worker(5, producer=cycling(["hostile_answers"]))
    honest = pool.worker(4)
    validator = pool.validator()
    try:
        assert adversary.step_once(stop)
        assert validator.run_once() == 1
        (attack,) = adversary.journal.entries("submitted")
        assert _reason(pool, bytes.fromhex(attack["work_id"])) == Reason.REWARD
        assert honest.step_once(stop)
        assert validator.run_once() == 1  # the same daemon, its checker already used on the attacker's file
    finally:
        validator.close()
    (entry,) = honest.journal.entries("submitted")
    assert get_work(pool.ledger(0), bytes.fromhex(entry["work_id"])).status == WorkStatus.ACCEPTED
    samples = decode_rollouts(Path(attack["file"]).read_bytes()).samples  # what the validator was sent
    texts = [adversary.policy.tokenizer.decode(s.completion_ids, skip_special_tokens=True) for s in samples]
    assert any("__import__" in t for t in texts) and all(s.reward == 1.0 for s in samples)
