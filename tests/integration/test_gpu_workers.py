"""GPU workers — the torch backend on CUDA in bf16, and vLLM — against the CPU float32 validator: their
completions pass at the thresholds `validator calibrate` measures for their engine, and the same thresholds
reject a tampered completion and another model's work. Needs a CUDA GPU (and vLLM for its case)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from examples.hf_models import qwen2_style
from inference.backend import InferenceBackend
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import TorchBackend
from inference.verify import CompletionRecord, verify_completions
from proofs.sampling import derive_seed
from proofs.toploc import build_proofs_batch
from protocol.runspec import RunSpec, load_run_spec
from tasks.encoding import encode_prompt
from tasks.registry import build_task
from tests.support.paths import ROOT
from validator.checks import verify_config_of

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU workers need a CUDA GPU"),
]

RUN_SPEC = """
prompts_per_submission = 4
pool_seed = "0x7676767676767676767676767676767676767676767676767676767676767676"

[task]
name = "sort"
params = { min_digits = 3, max_digits = 3 }

[sampling]
group_size = 2
temperature = 1.0
max_tokens = 64
"""

ENGINES = {
    "torch-cuda": ["--worker-device", "cuda"],
    "vllm": ["--backend", "vllm"],
}


def _worker(engine: str, folder: Path, stops: tuple[int, ...]) -> InferenceBackend:
    if engine == "vllm":
        from inference.vllm_backend import VllmBackend

        worker = VllmBackend(str(folder), gpu_memory_utilization=0.3, max_model_len=512)
        assert worker.eos_token_ids == stops
        return worker
    model, _ = load_policy(folder)
    return TorchBackend(model, compute_dtype=torch.bfloat16, eos_token_id=stops, device="cuda")


def _records(worker: InferenceBackend, prompts, spec: RunSpec, seeds) -> list[CompletionRecord]:
    completions = worker.generate(prompts, spec.sampling, seeds)
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                             finish_reason=c.finish_reason) for p, c, pr in zip(prompts, completions, proofs)]


@pytest.mark.parametrize("engine", [
    "torch-cuda",
    pytest.param("vllm", marks=pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                                  reason="vLLM not installed (pip install '.[vllm]')")),
])
def test_gpu_completions_pass_the_cpu_validator_at_calibrated_thresholds(engine: str, tmp_path: Path) -> None:
    folder = qwen2_style(tmp_path / "qwen2", hidden=256)  # bf16, tied, two EOS ids; head dim 64
    task_file, spec_file, table = tmp_path / "task.toml", tmp_path / "run.toml", tmp_path / "verification.toml"
    task_file.write_text(RUN_SPEC)
    # its own process, so that a vLLM engine has released the GPU before ours starts
    subprocess.run([sys.executable, "-m", "validator.cli", "calibrate", "--checkpoint", str(folder), "--run-spec",
                    str(task_file), *ENGINES[engine], "--dtypes", "bfloat16", "--batch-sizes", "1,8",
                    "--prompts", "16", "--out", str(table)], check=True, cwd=ROOT)
    spec_file.write_text(RUN_SPEC + table.read_text())
    spec = load_run_spec(spec_file)
    config = verify_config_of(spec)

    model, tokenizer = load_policy(folder)
    stops = stop_token_ids(model, tokenizer)
    task = build_task(spec.task)
    prompts = [encode_prompt(tokenizer, task.problem(100 + i).prompt) for i in range(16)]  # not the calibration's
    seeds = [derive_seed(spec.pool_seed_bytes, "0x" + "77" * 20, bytes(32), i) for i in range(len(prompts))]
    records = _records(_worker(engine, folder, stops), prompts, spec, seeds)
    validator = TorchBackend(model, eos_token_id=stops)
    verdicts = verify_completions(validator, records, config, expected_prompts=prompts, expected_seeds=seeds)
    assert all(v.passed for v in verdicts), [v.failed for v in verdicts]

    tampered = records[0].model_copy(update={"completion_ids": [(records[0].completion_ids[0] + 1) % len(tokenizer),
                                                                *records[0].completion_ids[1:]]})
    (verdict,) = verify_completions(validator, [tampered], config, expected_prompts=prompts[:1],
                                    expected_seeds=seeds[:1])
    assert not verdict.passed

    if engine == "torch-cuda":  # vLLM: one engine per process, so the other model is tried on torch only
        other = _worker(engine, qwen2_style(tmp_path / "other", hidden=256, seed=1), stops)
        cheated = verify_completions(validator, _records(other, prompts, spec, seeds), config,
                                     expected_prompts=prompts, expected_seeds=seeds)
        assert not any(v.passed for v in cheated)
