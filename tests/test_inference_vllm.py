"""vLLM backend: same contract as the torch backend, and its completions pass the torch validator at the
thresholds `validator calibrate --backend vllm` measures. Needs a CUDA GPU and vLLM (the `vllm` extra)."""

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
from inference.tiny import BOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from inference.verify import CompletionRecord, verify_completions
from proofs.sampling import derive_seed, replay
from proofs.toploc import accept, build_proofs, build_proofs_batch, verify_proofs
from protocol.runspec import SamplingSpec, load_run_spec
from tasks.encoding import encode_prompt
from tasks.registry import build_task
from validator.checks import verify_config_of

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM backend needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM not installed (pip install '.[vllm]')"),
]


def test_vllm_generation_replays_and_proves_against_its_own_prefill(tmp_path) -> None:
    from inference.vllm_backend import VllmBackend

    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(len(tokenizer), 0, hidden=256, layers=4, heads=4,
                             dtype=torch.bfloat16, lm_head_std=0.12)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    backend = VllmBackend(str(tmp_path), gpu_memory_utilization=0.2, max_model_len=512)
    assert isinstance(backend, InferenceBackend)
    prompts = [[BOS_ID, *tokenizer.encode(t)] for t in ("What is 2+3?", "Hello")]
    params = SamplingSpec(temperature=1.0, max_tokens=64)
    completions = backend.generate(prompts, params, [11, 12])
    for prompt, completion in zip(prompts, completions):
        prefill = backend.prefill(prompt, completion.token_ids)
        assert replay(prefill.logits, completion.token_ids, completion.seed, 1.0, 1.0, 0.1).passed
        assert accept(verify_proofs(prefill.hidden, build_proofs(completion.hidden)))


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


def test_vllm_completions_of_a_hugging_face_folder_pass_the_torch_validator_at_calibrated_thresholds(tmp_path) -> None:
    from inference.vllm_backend import VllmBackend

    folder = qwen2_style(tmp_path / "qwen2", hidden=256)  # bf16, tied, two EOS ids; head dim 64
    task_file, spec_file, table = tmp_path / "task.toml", tmp_path / "run.toml", tmp_path / "verification.toml"
    task_file.write_text(RUN_SPEC)
    # its own process, so that its engine has released the GPU before ours starts
    subprocess.run([sys.executable, "-m", "validator.cli", "calibrate", "--checkpoint", str(folder), "--run-spec",
                    str(task_file), "--backend", "vllm", "--dtypes", "bfloat16", "--batch-sizes", "1,8",
                    "--prompts", "8", "--out", str(table)], check=True, cwd=Path(__file__).resolve().parent.parent)
    spec_file.write_text(RUN_SPEC + table.read_text())
    spec = load_run_spec(spec_file)

    model, tokenizer = load_policy(folder)
    task = build_task(spec.task)
    prompts = [encode_prompt(tokenizer, task.problem(100 + i).prompt) for i in range(8)]  # not the calibration's
    seeds = [derive_seed(spec.pool_seed_bytes, "0x" + "77" * 20, 0, i) for i in range(len(prompts))]
    worker = VllmBackend(str(folder), gpu_memory_utilization=0.3, max_model_len=512)
    assert worker.eos_token_ids == stop_token_ids(model, tokenizer)
    completions = worker.generate(prompts, spec.sampling, seeds)
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    records = [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed, logprobs=c.logprobs,
                                finish_reason=c.finish_reason) for p, c, pr in zip(prompts, completions, proofs)]
    validator = TorchBackend(model, eos_token_id=stop_token_ids(model, tokenizer))
    config = verify_config_of(spec)
    verdicts = verify_completions(validator, records, config, expected_prompts=prompts, expected_seeds=seeds)
    assert all(v.passed for v in verdicts), [v.failed for v in verdicts]

    tampered = records[0].model_copy(update={"completion_ids": [(records[0].completion_ids[0] + 1) % len(tokenizer),
                                                                *records[0].completion_ids[1:]]})
    (verdict,) = verify_completions(validator, [tampered], config, expected_prompts=prompts[:1],
                                    expected_seeds=seeds[:1])
    assert not verdict.passed
