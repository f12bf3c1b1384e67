"""The validator's memory at a real vocabulary size stays bounded by its prefill batch, not its file.

One rollout file of the shipped shape (examples/run.toml: 8 prompts × 16 = 128 completions of 8 tokens,
here with 20-token prompts) with honest TOPLOC proofs, verified by `verify_completions` at
q = 1 (every completion prefilled, replayed, TOPLOC-checked) with VerifyConfig's
default `max_batch_tokens` (1,024 padded positions) and with 256, on a Qwen2-style model built in code
with V = 152,064 (hidden 64, 2 layers, tied embeddings, float32).

The measure, as in tests/integration/test_trainer_memory.py: growth of the peak resident set during the
verification — VmHWM reset just before it (`echo 5 > /proc/self/clear_refs`), read after it, minus the
resident set at the reset. Heap pages the allocator holds free are handed back first (`malloc_trim`), so
that memory a check reuses counts as growth too.

The bound: the float32 logits of one prefill batch, at most max_batch_tokens × V × 4 bytes (594 MiB at
1,024, 149 MiB at 256), plus 100 MiB for everything else (replay and log-softmax blocks of 2^22 and 2^20
floats, the batch's hidden states and KV cache, the verdicts); and below the whole file's completion
logits (594 MiB). Measured on the 2-core VM: 188 MiB at 1,024 and 52 MiB at 256, each check in ~6 s
(1 thread). The verifier before batching held the whole file's logits at once: 635 MiB.
"""

import random
import sys

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import (
    DEFAULT_MAX_BATCH_TOKENS,
    FP32_THRESHOLDS,
    CompletionRecord,
    VerifyConfig,
    verify_completions,
)
from proofs.toploc import build_proofs_batch
from protocol.runspec import SamplingSpec
from tests.support.peak_memory import peak_growth_mib

VOCAB = 152_064
PROMPTS, GROUP, PROMPT_TOKENS = 8, 16, 20
SAMPLING = SamplingSpec(group_size=GROUP, temperature=1.0, max_tokens=8)  # examples/run.toml
MIB = 2**20
OTHER_BOUND_MIB = 100

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self (Linux)")


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread (as the suite runs): two threads on two shared cores are several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def backend_and_file(one_thread) -> tuple[TorchBackend, list[CompletionRecord]]:
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True, pad_token_id=0))
    backend = TorchBackend(model, eos_token_id=NO_EOS)  # untrained: every completion runs to max_tokens
    rng = random.Random(0)
    prompts = [prompt for _ in range(PROMPTS) for prompt in [[rng.randrange(VOCAB) for _ in range(PROMPT_TOKENS)]]
               for _ in range(GROUP)]
    completions = backend.generate(prompts, SAMPLING, list(range(len(prompts))))
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    records = [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=pr, seed=c.seed,
                                finish_reason=c.finish_reason)
               for p, c, pr in zip(prompts, completions, proofs)]
    return backend, records


@pytest.mark.parametrize("max_batch_tokens", [DEFAULT_MAX_BATCH_TOKENS, 256])
def test_verifying_a_file_at_152k_vocabulary_is_bounded_by_the_prefill_batch(backend_and_file, max_batch_tokens):
    backend, records = backend_and_file
    config = VerifyConfig(sampling=SAMPLING, thresholds=FP32_THRESHOLDS, chunk=32, max_batch_tokens=max_batch_tokens)

    verdicts, growth_mib = peak_growth_mib(lambda: verify_completions(backend, records, config))

    file_logits_mib = sum(len(r.completion_ids) for r in records) * VOCAB * 4 / MIB
    bound_mib = config.max_batch_tokens * VOCAB * 4 / MIB + OTHER_BOUND_MIB
    assert len(records) == 128 and all(v.passed and v.prefilled for v in verdicts)
    assert growth_mib < bound_mib, f"peak RSS grew {growth_mib:.0f} MiB verifying one file (bound {bound_mib:.0f} MiB)"
    assert growth_mib < file_logits_mib  # not even the float32 logits of the whole file at once
