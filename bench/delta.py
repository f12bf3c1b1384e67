"""Patch size / full size of each published policy, and bit-exact reconstruction from the parent.

    python -m bench.delta [--quick] [--steps N]

Two runs of the real trainer loop (trainer/loop.py: GRPO loss, AdamW with float32 master
weights, gradient clipping), each policy going through the publisher's delta path
(checkpoints/delta.py: encode against the policy published before, apply to it, re-serialise the
safetensors shards and compare their sha256 with the shards published in full):

- `patch_ratio`: a bf16 Qwen2-style fixture (~5M parameters, built in code) trained at
  INTELLECT-2's learning rate 3e-7 (no warmup) and published in bf16, the dtype workers load. Its
  rollouts are synthetic (random completions, binary rewards): AdamW moves every weight by ~lr
  per step whatever the data, and what a patch holds is which bf16 values that moved across a
  rounding boundary.
- `cpu_recipe_patch_ratio`: the CPU recipe (examples/cpu_run.py: its tiny Llama after the
  supervised warm start, its lr and warmup, rollouts sampled from the policy on the sort task),
  published as the trainer publishes it (float32); `cpu_recipe_bf16_patch_ratio` is the same run's
  policies cast to bf16.

`bit_exact` is true when every step of both runs rebuilt every shard bit for bit. Per-step
ratios are in `*_per_step`. Prints a table, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, print_rows
from examples.cpu_run import SYNC_WORKER, CpuRecipe, warm_policy
from inference.torch_backend import TorchBackend
from ledger_client.ipfs.checkpoints import (
    apply_delta,
    encode_delta,
    plan_shards,
    split_aliases,
)
from ledger_client.ipfs.checkpoints.publish import encode_shard
from proofs.assignment import assign_prompts
from protocol.digest import Digest
from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample
from protocol.runspec import SamplingSpec
from protocol.submission import local_binding
from trainer.config import TrainerConfig
from trainer.loop import Trainer
from trainer.work_source import InMemorySource
from worker.rollouts import make_rollouts

FIXTURE_LR = 3e-7
SHARD_BYTES = 4 << 20
FIXTURE_SAMPLING = SamplingSpec(group_size=8, temperature=1.0, max_tokens=16)


class DeltaRecorder:
    """A publisher hook: patch each policy (cast to `dtype`) against the previous one and check it."""

    def __init__(self, dtype: torch.dtype | None) -> None:
        self.dtype = dtype
        self.parent: dict[str, torch.Tensor] | None = None
        self.ratios: list[float] = []
        self.exact: list[bool] = []
        self.encode_s = 0.0

    def __call__(self, step: int, state: dict[str, torch.Tensor]) -> None:
        cast = {k: v.to(self.dtype) if self.dtype is not None else v for k, v in state.items()}
        stored, _ = split_aliases(cast)
        if self.parent is not None:
            started = time.perf_counter()
            patch = encode_delta(self.parent, stored)
            self.encode_s += time.perf_counter() - started
            plan = plan_shards([(n, t.numel() * t.element_size()) for n, t in stored.items()], SHARD_BYTES)
            published = [encode_shard({n: stored[n] for n in names}) for names in plan]
            rebuilt = apply_delta(patch, self.parent)
            self.exact.append(all(
                hashlib.sha256(encode_shard({n: rebuilt[n] for n in names})).digest() == hashlib.sha256(full).digest()
                for names, full in zip(plan, published, strict=True)))
            self.ratios.append(len(patch) / sum(len(full) for full in published))
        self.parent = stored


def fixture_model() -> Qwen2ForCausalLM:
    """A random bf16 Qwen2-style checkpoint of ~5M parameters (tied embeddings, GQA)."""
    config = Qwen2Config(vocab_size=4096, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, pad_token_id=0)
    torch.manual_seed(0)
    bf16 = Qwen2ForCausalLM(config).to(torch.bfloat16)
    return bf16.float().eval()  # float32 master weights, exactly the bf16 checkpoint's values


def synthetic_batch(seed: int, policy_step: int, vocab: int, groups: int = 4) -> RolloutBatch:
    rng = random.Random(seed)
    g = FIXTURE_SAMPLING.group_size
    header = RolloutHeader.bound(local_binding(SYNC_WORKER, policy_step, seed), manifest_digest="0x" + "00" * 32,
                                 task={"name": "synthetic"}, sampling=FIXTURE_SAMPLING, proof_chunk=0)
    samples = []
    for group in range(groups):
        prompt = [rng.randrange(1, vocab) for _ in range(12)]
        for s in range(g):
            n = rng.randint(4, FIXTURE_SAMPLING.max_tokens)
            samples.append(RolloutSample(
                group=group, sample=s, prompt_index=group, prompt_ids=prompt,
                completion_ids=[rng.randrange(1, vocab) for _ in range(n)], logprobs=[-8.0] * n,
                reward=float(rng.random() < 0.5 or s == 0) * float(s != 1), finish_reason="length", seed=s, proofs=[]))
    return RolloutBatch(header=header, samples=samples)


def run_fixture(steps: int, run_dir: Path) -> DeltaRecorder:
    model = fixture_model()
    recorder = DeltaRecorder(torch.bfloat16)
    config = TrainerConfig(run_dir=run_dir, sampling=FIXTURE_SAMPLING, batch_samples=4 * FIXTURE_SAMPLING.group_size,
                           async_level=1, max_steps=steps, checkpoint_every=steps, optim={"lr": FIXTURE_LR, "warmup_steps": 0})
    source = InMemorySource()
    trainer = Trainer(config, model, source, publishers=[recorder])
    trainer.start()
    while trainer.step < steps:
        source.put(f"{trainer.step}", synthetic_batch(trainer.step, trainer.step, model.config.vocab_size))
        trainer.train_step()
    return recorder


def run_cpu_recipe(steps: int, run_dir: Path) -> tuple[DeltaRecorder, DeltaRecorder, CpuRecipe]:
    spec = CpuRecipe()
    model, tokenizer, task = warm_policy(spec)
    recorder, as_bf16 = DeltaRecorder(None), DeltaRecorder(torch.bfloat16)
    config = spec.trainer_config(run_dir, async_level=0).model_copy(update={"max_steps": steps, "checkpoint_every": steps})
    source = InMemorySource()
    trainer = Trainer(config, model, source, publishers=[recorder, as_bf16])
    trainer.start()
    files = 0
    while trainer.step < steps:
        while not trainer.ready():
            indices = assign_prompts(bytes(32), SYNC_WORKER, files, 2**62, spec.prompts_per_file)
            source.put(f"{files:06d}", make_rollouts(TorchBackend(model), tokenizer, task, spec.task, indices,
                                                     spec.sampling, local_binding(SYNC_WORKER, trainer.step, files),
                                                     Digest(bytes(32))))
            files += 1
        trainer.train_step()
    return recorder, as_bf16, spec


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.delta", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 steps per run instead of 20")
    parser.add_argument("--steps", type=int, help="training steps per run (overrides --quick)")
    add_record_option(parser)
    args = parser.parse_args()
    steps = args.steps or (5 if args.quick else 20)
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
        fixture = run_fixture(steps, Path(tmp) / "fixture")
        recipe, recipe_bf16, spec = run_cpu_recipe(steps, Path(tmp) / "recipe")
    fixture_params = sum(t.numel() for t in fixture.parent.values()) if fixture.parent else 0
    result = {
        "steps": steps,
        "patch_ratio": round(sum(fixture.ratios) / len(fixture.ratios), 5),
        "patch_ratio_max": round(max(fixture.ratios), 5),
        "patch_ratio_per_step": [round(r, 5) for r in fixture.ratios],
        "fixture_params": fixture_params,
        "fixture_lr": FIXTURE_LR,
        "fixture_dtype": "bfloat16",
        "cpu_recipe_patch_ratio": round(sum(recipe.ratios) / len(recipe.ratios), 5),
        "cpu_recipe_patch_ratio_per_step": [round(r, 5) for r in recipe.ratios],
        "cpu_recipe_lr": spec.lr,
        "cpu_recipe_dtype": "float32",
        "cpu_recipe_bf16_patch_ratio": round(sum(recipe_bf16.ratios) / len(recipe_bf16.ratios), 5),
        "bit_exact": all(fixture.exact) and all(recipe.exact) and all(recipe_bf16.exact),
        "encode_s_per_step": round((fixture.encode_s + recipe.encode_s) / (len(fixture.ratios) + len(recipe.ratios)), 4),
    }
    print(f"policy deltas over {steps} steps (ratio = compressed patch bytes / full shard bytes)")
    rows = [
        (f"bf16 fixture, {fixture_params / 1e6:.1f}M params, lr {FIXTURE_LR:g}", f"{result['patch_ratio']:.4f}"),
        ("  worst step", f"{result['patch_ratio_max']:.4f}"),
        (f"CPU recipe (float32, lr {spec.lr:g}, warmup 10)", f"{result['cpu_recipe_patch_ratio']:.4f}"),
        ("  the same policies cast to bf16", f"{result['cpu_recipe_bf16_patch_ratio']:.4f}"),
        ("every shard rebuilt bit for bit", str(result["bit_exact"])),
    ]
    print_rows(rows, result, args, "delta")


if __name__ == "__main__":
    exit_on_signals()
    main()
