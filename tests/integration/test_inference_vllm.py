"""vLLM backend: same contract as the torch backend (tests/integration/test_gpu_workers.py checks its completions at
calibrated thresholds). Needs a CUDA GPU and vLLM (the `vllm` extra)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from inference.backend import InferenceBackend
from inference.tiny import BOS_ID, build_char_tokenizer, build_tiny_llama
from proofs.sampling import replay
from proofs.toploc import accept, build_proofs, verify_proofs
from protocol.runspec import SamplingSpec

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
