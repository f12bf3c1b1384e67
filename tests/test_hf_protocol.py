"""The whole protocol on real-format Hugging Face folders (examples/hf_models.py, vocabularies over 32k) on a
real anvil + Kubo: `trainer init --checkpoint FOLDER` publishes the base checkpoint and run spec, two workers
generate and submit, the validator verifies and attests, `trainer start` trains on the accepted work and
publishes step 1, and a worker fetches step 1 and submits work on it that the validator accepts."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from examples.hf_models import llama_style, qwen2_style
from ledger_client.chain.queries import get_work, pool_state
from ledger_client.ipfs.content import fetch_run_spec
from protocol.digest import Digest
from protocol.pool import WorkStatus
from tests.protocol_pool import ProtocolPool
from trainer.main import main as trainer_main
from worker.daemon import WorkerDaemon

RUN_SPEC = """
prompts_per_submission = 2
pool_seed = "0x{seed}"

[task]
name = "sort"
params = {{ min_digits = 3, max_digits = 3 }}
length_targets = [2, 6]  # rewards that vary with the completion's length: informative groups from step 0

[sampling]
group_size = 4
temperature = 1.0
max_tokens = 6

[verification]  # float32 reference and float32 workers (validator calibrate measures them on these folders)
toploc_min_exp_matches = 125
toploc_max_mant_err_mean = 0.03
toploc_max_mant_err_median = 0.0
toploc_mean_excludes_max = true
"""
WARM_START = ["--warm-steps", "4", "--warm-lr", "3e-2"]
"""Enough for the random-weight policy to end some answers with its EOS, so completion lengths vary."""
BUILDERS = {"qwen2": qwen2_style, "llama": llama_style}


@pytest.fixture
def pool(tmp_path, kubo_node):
    p = ProtocolPool(tmp_path, kubo_node)
    yield p
    p.close()


def _submitted(worker: WorkerDaemon) -> list[dict]:
    return worker.journal.entries("submitted")


def _status(pool: ProtocolPool, entry: dict) -> WorkStatus:
    return get_work(pool.ledger(0), bytes.fromhex(entry["work_id"])).status


@pytest.mark.timeout(300)
@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_a_pool_runs_end_to_end_on_a_hugging_face_folder(family, pool, tmp_path, capsys):
    folder = BUILDERS[family](tmp_path / family)
    spec_file = tmp_path / "run.toml"
    spec_file.write_text(RUN_SPEC.format(seed="5e" * 32))
    assert trainer_main(["init", "--run-spec", str(spec_file), "--checkpoint", str(folder), "--kubo-api",
                         pool.kubo_api, *WARM_START]) == 0
    init = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    task_ref, base = Digest.parse(init["task"]), Digest.parse(init["base_checkpoint"])
    spec = fetch_run_spec(pool.kubo, task_ref)
    pool.create(spec, bytes(task_ref), bytes(base))

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
                             "--set", "batch_samples=4", "--set", "wait_timeout_s=20", "--json"]) == 0
        consumed = json.loads((run_dir / "consumed.json").read_text())
        accepted = {"0x" + e["work_id"] for w in workers for e in _submitted(w)}
        assert consumed["step"] == 1 and consumed["consumed"] and set(consumed["consumed"]) <= accepted
        assert pool_state(pool.ledger(0), pool.pool_id).latest_step == 1

        base_weights = {k: v.clone() for k, v in workers[0].policy.model.state_dict().items()}
        assert workers[0].step_once(stop)  # fetches the step-1 checkpoint from IPFS, then submits on it
        assert workers[0].policy.step == 1
        assert workers[0].policy.manifest_digest == bytes(pool.ledger(0).pool.checkpoint_at(pool.pool_id, 1))
        trained = workers[0].policy.model.state_dict()
        assert any(not torch.equal(trained[k], base_weights[k]) for k in base_weights)
        assert validator.run_once() == 1
    finally:
        validator.close()
    latest = _submitted(workers[0])[-1]
    assert latest["step"] == 1 and _status(pool, latest) == WorkStatus.ACCEPTED
