"""One trainer process, or one rank of a torch.distributed group, whose peak memory
tests/integration/test_retained_memory.py bounds: `python -m tests.support.retained_memory --out DIR`, alone or as the
ranks of a group (`torchrun --standalone --nproc-per-node 2 -m tests.support.retained_memory --out DIR`: FSDP2 on
gloo).

Each process writes `DIR/rank<r>.json`: P (the model's parameters), the parameters of one decoder layer, R (ranks),
the async level, the retained policies and `peak_bytes` — the growth of the process's peak resident set from just
before the model is built (torch imported, the process group up) to the end of STEPS training steps, read from
/proc/self (tests/support/peak_memory.py). Every step's batch has rows of the two oldest policies it may train on, so
each step swaps past policies into the model to recompute logp_behav."""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import LlamaConfig, LlamaForCausalLM

from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample
from protocol.runspec import SamplingSpec
from tests.support.peak_memory import peak_growth_mib
from trainer.config import TrainerConfig
from trainer.distributed import Distributed, launched_by_torchrun
from trainer.loop import Trainer
from trainer.parallel import Parallel, SingleProcess
from trainer.work_source import InMemorySource

ASYNC_LEVEL = 2
STEPS = 3  # step 3 trains on rows of policies 0 and 1 with policies 0, 1 and 2 retained
G = 4
VOCAB = 512
SAMPLING = SamplingSpec(group_size=G, temperature=1.0, max_tokens=4)
M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)


def build_model() -> LlamaForCausalLM:
    """A Llama of ~27.5 M parameters, nearly all in its 8 decoder layers (a small vocabulary): the P terms, not the
    activations of a few dozen positions, make its memory."""
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=512, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=8,
        num_key_value_heads=8, max_position_embeddings=64, tie_word_embeddings=True, pad_token_id=0)).eval()


def rollouts(policy_step: int, seed: int) -> RolloutBatch:
    """Two groups of G completions sampled (so the header says) by `policy_step`."""
    rng = random.Random(seed)
    header = RolloutHeader(chain_id=0, pool_contract="0x" + "00" * 20, pool_id=0, nonce=seed, policy_step=policy_step,
                           manifest_digest="0x" + "00" * 32, worker="0x" + "ab" * 20, task={"name": "test"},
                           sampling=SAMPLING, proof_chunk=0)
    samples = []
    for g in range(2):
        prompt = [1] + [rng.randrange(4, VOCAB) for _ in range(3)]
        for s in range(G):
            completion = [rng.randrange(4, VOCAB) for _ in range(SAMPLING.max_tokens)]
            samples.append(RolloutSample(group=g, sample=s, prompt_index=g, prompt_ids=prompt, completion_ids=completion,
                                         logprobs=[-6.0] * len(completion), reward=float(s % 2),
                                         finish_reason="length", seed=s, proofs=[]))
    return RolloutBatch(header=header, samples=samples)


def train(run_dir: Path, parallel: Parallel) -> dict:
    """STEPS steps; each takes a file of the oldest policy it may train on and one of the policy before the current."""
    config = TrainerConfig(run_dir=run_dir, sampling=SAMPLING, batch_samples=4 * G, async_level=ASYNC_LEVEL,
                           max_steps=STEPS, wait_timeout_s=30, poll_interval_s=0.01)
    model = build_model()
    parameters = sum(p.numel() for p in model.parameters())
    layer_parameters = sum(p.numel() for p in model.model.layers[0].parameters())
    source = InMemorySource()
    trainer = Trainer(config, model, source, parallel=parallel)
    trainer.start()
    for step in range(STEPS):
        source.put(f"old{step}", rollouts(max(0, step - ASYNC_LEVEL), seed=2 * step))
        source.put(f"new{step}", rollouts(max(0, step - 1), seed=2 * step + 1))
        metrics = trainer.train_step()
        assert metrics.files_consumed == 2 and metrics.grad_norm > 0, metrics
    return {"parameters": parameters, "layer_parameters": layer_parameters, "retained": sorted(trainer.policies),
            "dtypes": sorted({str(t.dtype) for shards in trainer.policies.values() for t in shards.values()})}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    # a fixed mmap threshold: glibc otherwise raises it to the size of the largest block freed (up to 32 MiB), and
    # keeps the freed parameter-sized blocks below it in its heap, counted in the resident set though no tensor
    # holds them; with it every tensor of 128 KiB or more is mapped when made and unmapped when freed
    ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    parallel = Distributed("fsdp") if launched_by_torchrun() else SingleProcess()
    with tempfile.TemporaryDirectory() as tmp:
        box = [tmp]  # the run folder every rank shares: rank 0's
        if parallel.world_size > 1:
            dist.broadcast_object_list(box, src=0)
        result, growth_mib = peak_growth_mib(lambda: train(Path(box[0]), parallel))
        if parallel.world_size > 1:
            dist.barrier()  # rank 0's folder outlives every rank's use of it
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{parallel.rank}.json").write_text(json.dumps({
        **result, "ranks": parallel.world_size, "async_level": ASYNC_LEVEL, "peak_bytes": growth_mib * 2**20}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
