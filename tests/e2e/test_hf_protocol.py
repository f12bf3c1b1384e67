"""The whole protocol on real-format Hugging Face folders (examples/hf_models.py, vocabularies over 32k) on a
real anvil + Kubo: `trainer init --checkpoint FOLDER` publishes the base checkpoint and run spec, two workers
generate and submit, the validator verifies and attests, `trainer start` trains on the accepted work and
publishes step 1, and a worker fetches step 1 and submits work on it that the validator accepts. Then the
thresholds `validator calibrate` measures on each folder, put in the pool's run spec, let honest float32 and
bf16 workers through and still have every file attack of adversaries/workers.py challenged."""

from __future__ import annotations

import functools
import json
import signal
import threading
from pathlib import Path

import pytest
import torch

from adversaries.workers import ATTACKS, cycling, selective_upload
from examples.hf_models import llama_style, qwen2_style
from inference.policy import load_policy, stop_token_ids
from ledger_client.chain.queries import get_work, pool_state
from protocol.pool import WorkStatus
from protocol.runspec import load_run_spec
from protocol.verdicts import Reason
from tasks.encoding import encode_prompt
from tests.support.protocol_pool import ProtocolPool
from tests.e2e.test_protocol import EXPECTED
from trainer.consumed_log import read_consumed
from trainer.main import main as trainer_main
from validator.cli import main as validator_main
from worker.daemon import WorkerDaemon
from worker.policy import Policy
from worker.produce import produce_rollout_file

RUN_SPEC = """
prompts_per_submission = 2
pool_seed = "0x5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"

[task]
name = "sort"
params = { min_digits = 3, max_digits = 3 }
length_targets = [2, 6]  # rewards that vary with the completion's length: informative groups from step 0

[sampling]
group_size = 4
temperature = 1.0
max_tokens = 6
"""
FP32_VERIFICATION = """
[verification]  # float32 reference and float32 workers (the calibration test below measures bf16 ones)
toploc_min_exp_matches = 125
toploc_max_mant_err_mean = 0.03
toploc_max_mant_err_median = 0.0
toploc_mean_excludes_max = true
"""
SECOND_CHANCE = ("wrong_temperature",)
"""Attacks whose verdict rests on the margin statistics of one small file and so holds per file with a probability,
not always: a sampler at half the temperature changes a few of this spec's 48 tokens, some of them near-ties inside
the bf16 tolerance (caught in 90 of 90 files offline, accepted once in a rehearsal; R6.18). Each is submitted twice,
and one of its files must be challenged for the expected reason (the per-worker test sees the worker's books too); a
second file whose tokens all match the honest draw is replaced by the fallback attack, judged as that one."""
WARM_START = ["--warm-steps", "4", "--warm-lr", "3e-2"]
"""Enough for the random-weight policy to end some answers with its EOS, so completion lengths vary."""
BUILDERS = {"qwen2": qwen2_style, "llama": llama_style}


@pytest.fixture(autouse=True)
def _process_settings_restored():
    """`trainer init` and `trainer start` run in this process set torch's thread count and a SIGTERM handler:
    the tests after these get theirs back."""
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGTERM)
    yield
    torch.set_num_threads(threads)
    signal.signal(signal.SIGTERM, handler)


@pytest.fixture
def pool(tmp_path, kubo_node):
    p = ProtocolPool(tmp_path, kubo_node)
    yield p
    p.close()


def _submitted(worker: WorkerDaemon) -> list[dict]:
    return worker.journal.entries("submitted")


def _status(pool: ProtocolPool, entry: dict) -> WorkStatus:
    return get_work(pool.ledger(0), bytes.fromhex(entry["work_id"])).status


@pytest.mark.timeout(900)  # a bound on a hang in a loaded `make test` (300 s was hit at load 15), never a pace
@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_a_pool_runs_end_to_end_on_a_hugging_face_folder(family, pool, tmp_path):
    folder = BUILDERS[family](tmp_path / family)
    spec_file = tmp_path / "run.toml"
    spec_file.write_text(RUN_SPEC + FP32_VERIFICATION)
    pool.create_by_trainer_init(spec_file, "--checkpoint", str(folder), *WARM_START)

    stop = threading.Event()
    workers = [pool.worker(4), pool.worker(5)]
    for worker in workers:
        assert worker.step_once(stop)
    assert workers[0].policy.model.config.vocab_size >= 32_000
    validator = pool.validator()
    try:
        assert validator.run_once() == 2
        assert [_status(pool, e) for w in workers for e in _submitted(w)] == [WorkStatus.ACCEPTED] * 2

        run_dir = tmp_path / "trainer"
        assert trainer_main(["start", "--pool", str(pool.pool_id), "--rpc-url", pool.anvil.rpc_url,
                             "--deployments", str(pool.deployments), "--key", pool.accounts[2].key.hex(),
                             "--kubo-api", pool.kubo_api, "--set", f"run_dir={run_dir}", "--set", "max_steps=1",
                             "--set", "batch_samples=4", "--set", "wait_timeout_s=20", "--json",
                             "--no-wait-final"]) == 0  # W is an hour; finality: test_trainer_finality.py
        consumed = json.loads((run_dir / "consumed.json").read_text())
        accepted = {"0x" + e["work_id"] for w in workers for e in _submitted(w)}
        consumed_ids = read_consumed(run_dir / consumed["consumed_log"])
        assert consumed["step"] == 1 and consumed["consumed"] == len(consumed_ids) > 0 and set(consumed_ids) <= accepted
        assert pool_state(pool.ledger(0), pool.pool_id).latest_step == 1

        base_weights = {k: v.clone() for k, v in workers[0].policy.model.state_dict().items()}
        # its next nonce was pinned to step 0 when it submitted: that file is made at step 0, and its submission
        # pins the one after to step 1, for which the worker fetches the step-1 checkpoint from IPFS
        assert workers[0].step_once(stop) and workers[0].policy.step == 0
        assert validator.run_once() == 1
        assert workers[0].step_once(stop)
        assert workers[0].policy.step == 1
        assert workers[0].policy.manifest_digest == bytes(pool.ledger(0).pool.checkpoint_at(pool.pool_id, 1))
        trained = workers[0].policy.model.state_dict()
        assert any(not torch.equal(trained[k], base_weights[k]) for k in base_weights)
        _assert_same_format(workers[0].policy, folder)
        assert validator.run_once() == 1
    finally:
        validator.close()
    latest = _submitted(workers[0])[-1]
    assert latest["step"] == 1 and _status(pool, latest) == WorkStatus.ACCEPTED


@pytest.mark.timeout(900)  # a bound on a hang in a loaded `make test` (300 s was hit at load 15), never a pace
@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_calibrated_thresholds_in_a_run_spec_pass_honest_bf16_workers_and_catch_every_attack(family, pool, tmp_path):
    folder = BUILDERS[family](tmp_path / family)
    task_file, spec_file, table = tmp_path / "task.toml", tmp_path / "run.toml", tmp_path / "verification.toml"
    task_file.write_text(RUN_SPEC)
    assert validator_main(["calibrate", "--checkpoint", str(folder), "--run-spec", str(task_file),
                           "--dtypes", "float32,bfloat16", "--batch-sizes", "1,8", "--prompts", "8",
                           "--out", str(table)]) == 0
    spec_file.write_text(RUN_SPEC + table.read_text())
    spec = pool.create_by_trainer_init(spec_file, "--checkpoint", str(folder), "--warm-steps", "0")
    calibrated = load_run_spec(spec_file).verification
    assert spec.verification == calibrated
    assert calibrated.toploc_min_exp_matches < 125 and calibrated.logit_tolerance > 1e-3  # looser than float32's

    stop = threading.Event()
    honest = [pool.worker(4, per_step=2),
              pool.worker(5, producer=functools.partial(produce_rollout_file, compute_dtype=torch.bfloat16),
                          per_step=2)]
    names = [*ATTACKS, *SECOND_CHANCE]
    attacks = cycling(names)
    adversary = pool.worker(6, producer=attacks, upload=selective_upload, per_step=len(names))
    for worker in honest:
        assert worker.step_once(stop) and worker.step_once(stop)
    for _ in names:
        assert adversary.step_once(stop)
    validator = pool.validator()
    try:
        assert validator.run_once() == 4 + len(names)
    finally:
        validator.close()

    assert [_status(pool, e) for w in honest for e in _submitted(w)] == [WorkStatus.ACCEPTED] * 4
    verdicts = [(name, _reason(pool, entry)) for entry, name in zip(_submitted(adversary), attacks.used, strict=True)]
    print("\ncalibrated", calibrated.model_dump(), "\nattack → verdict:", verdicts)
    # no attack fell back to another on this model (a second chance may: a colder sampler's file can equal the honest one)
    assert set(attacks.used) == set(ATTACKS) and attacks.used[:len(ATTACKS)] == list(ATTACKS)
    unexpected = [(name, reason) for name, reason in verdicts
                  if reason not in EXPECTED[name] and not (reason is None and name in SECOND_CHANCE)]
    assert not unexpected, f"attacks accepted or judged for another reason than expected: {unexpected}"
    for name in SECOND_CHANCE:
        assert any(reason in EXPECTED[name] for n, reason in verdicts if n == name), f"{name} accepted twice"


def _assert_same_format(policy: Policy, folder: Path) -> None:
    """The checkpoint the trainer published is still the folder's kind of model: chat template, stop tokens,
    tied or untied embeddings."""
    original, tokenizer = load_policy(folder)
    assert encode_prompt(policy.tokenizer, "Sort: 312") == encode_prompt(tokenizer, "Sort: 312")
    assert stop_token_ids(policy.model, policy.tokenizer) == stop_token_ids(original, tokenizer)
    tied = policy.model.get_output_embeddings().weight is policy.model.get_input_embeddings().weight
    assert tied == original.config.tie_word_embeddings


def _reason(pool: ProtocolPool, entry: dict) -> Reason | None:
    logs = pool.ledger(0).pool.contract.events.WorkChallenged.get_logs(
        from_block=0, argument_filters={"workId": bytes.fromhex(entry["work_id"])})
    return Reason(logs[0]["args"]["reasonCode"]) if logs else None
