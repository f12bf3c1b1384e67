"""The trainer's memory at a real vocabulary size stays bounded by its micro-batch, not its batch.

One GRPO step (Trainer.train_step: π_prox pass, loss, backward, AdamW, retained policy, checkpoint)
at the shipped batch settings — TrainerConfig's defaults: 128 samples, groups of 16, 16 completion
tokens, micro_batch_tokens = 1,024 — with 20-token prompts (the sort task's ChatML prompt under the
tokenizer of examples/hf_models.py), 4,480 padded positions, on a Qwen2-style model built in code
with V = 152,064 (hidden 64, 2 layers, tied embeddings, float32).

The measure: growth of the process's peak resident set during the step — the kernel's high-water
mark (VmHWM) is reset just before it (`echo 5 > /proc/self/clear_refs`) and read after it, minus the
resident set at the reset. Torch's CPU allocator takes tensors this large straight from mmap and
gives them back on free, so the growth covers every tensor the step holds at its worst moment;
it does not depend on what the test process held before. (tracemalloc cannot see torch's
allocations; ru_maxrss cannot be reset.)

The bound: the logits of one micro-batch and their gradient, 2 × micro_batch_tokens × V × 4 bytes
(1,188 MiB), plus 400 MiB for everything else (parameters' gradients, AdamW moments, policy
snapshots, checkpoint writing, chunk buffers). Measured on the 2-core VM: 1,304 MiB, the step in
7–13 s (1 thread); with micro_batch_tokens above the batch, 5,311 MiB. One float32 [positions, V] tensor of
the whole batch is 2,599 MiB; the step before chunking and micro-batching held several of them.
"""

import random
import sys

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample
from protocol.submission import local_binding
from tests.support.peak_memory import peak_growth_mib
from trainer.config import TrainerConfig
from trainer.loop import Trainer
from trainer.work_source import InMemorySource

VOCAB = 152_064
PROMPT_TOKENS = 20
MIB = 2**20
OTHER_BOUND_MIB = 400

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self (Linux)")


def _rollouts(config: TrainerConfig) -> RolloutBatch:
    rng = random.Random(0)
    sampling = config.sampling
    header = RolloutHeader.bound(local_binding("0x" + "ab" * 20, 0, 0), manifest_digest="0x" + "00" * 32,
                                 task={"name": "test"}, sampling=sampling, proof_chunk=0)
    samples = []
    for g in range(config.batch_samples // sampling.group_size):
        prompt = [rng.randrange(VOCAB) for _ in range(PROMPT_TOKENS)]
        for s in range(sampling.group_size):  # every completion at the token limit: the widest batch
            completion = [rng.randrange(VOCAB) for _ in range(sampling.max_tokens)]
            samples.append(RolloutSample(group=g, sample=s, prompt_index=g, prompt_ids=prompt,
                                         completion_ids=completion, logprobs=[-12.0] * len(completion),
                                         reward=float(s % 2), finish_reason="length", seed=s, proofs=[]))
    return RolloutBatch(header=header, samples=samples)


@pytest.fixture
def one_thread():
    """One torch thread (as the suite runs): two threads on two shared cores are several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_grpo_step_at_152k_vocabulary_is_bounded_by_its_micro_batch(tmp_path, one_thread):
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True, pad_token_id=0)).eval()
    config = TrainerConfig(run_dir=tmp_path, wait_timeout_s=5)  # the shipped batch settings
    source = InMemorySource()
    source.put("rollouts", _rollouts(config))
    trainer = Trainer(config, model, source)
    trainer.start()

    metrics, growth_mib = peak_growth_mib(trainer.train_step)

    tokens = config.batch_samples * (PROMPT_TOKENS + config.sampling.max_tokens - 1)
    whole_batch_fp32_mib = tokens * VOCAB * 4 / MIB
    bound_mib = 2 * config.micro_batch_tokens * VOCAB * 4 / MIB + OTHER_BOUND_MIB
    assert metrics.files_consumed == 1 and metrics.grad_norm > 0
    assert growth_mib < bound_mib, f"peak RSS grew {growth_mib:.0f} MiB in one step (bound {bound_mib:.0f} MiB)"
    assert growth_mib < whole_batch_fp32_mib  # not even one [tokens, V] float32 tensor of the whole batch
