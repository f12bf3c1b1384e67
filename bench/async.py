"""`python -m bench.async [--quick]`: synchronous vs asynchronous GRPO vs TRL's GRPOTrainer.

Every variant starts from the same warm-started policy and uses the same task, group size,
batch, learning rate and token limit, and runs until held-out greedy accuracy reaches the
target (or the time budget ends):

  sync    one process: generate a batch, train on it, generate again (async_level 0);
  async1  trainer process + `--workers` worker processes (default 1), async_level 1;
  async2  the same, async_level 2;
  trl     trl.GRPOTrainer (its own generate-then-train loop), configured as closely as it
          allows: same G, batch, lr, ε, δ, no KL, constant token normalisation (dr_grpo).

Prints a table, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from examples.cpu_run import CpuRecipe, RunResult, run_async, run_sync, warm_policy
from tasks.encoding import encode_prompt
from trainer.evaluate import greedy_accuracy


def run_trl(spec: CpuRecipe, run_dir: Path) -> RunResult:
    """The same recipe through trl.GRPOTrainer; raises ImportError when trl is absent."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer, task = warm_policy(spec)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    n_prompts = 20_000
    # TRL tokenises prompt text itself; "<bos>" is a registered special token, so the ids
    # match encode_prompt's exactly (checked below).
    prompts = [tokenizer.bos_token + task.problem(i).prompt for i in range(n_prompts)]
    assert tokenizer(prompts[0])["input_ids"] == encode_prompt(tokenizer, task.problem(0).prompt)
    dataset = Dataset.from_dict({"prompt": prompts, "index": list(range(n_prompts))})

    def reward(prompts: list[str], completions: list[str], index: list[int], **_: object) -> list[float]:
        return [task.reward(task.problem(i), c, len(c)) for i, c in zip(index, completions, strict=True)]

    state = {"start": 0.0, "reached": None, "accuracy": 0.0, "steps": 0, "begin": time.perf_counter()}

    class TargetAccuracy(TrainerCallback):
        def on_step_end(self, args, trainer_state, control, **kwargs):  # type: ignore[no-untyped-def]
            state["steps"] = trainer_state.global_step
            elapsed = time.perf_counter() - state["begin"]
            if trainer_state.global_step % spec.eval_every == 0:
                model.eval()
                state["accuracy"] = greedy_accuracy(model, tokenizer, task, spec.eval_problems, spec.sampling.max_tokens)
                model.train()
                if state["accuracy"] >= spec.target:
                    state["reached"] = elapsed
                    control.should_training_stop = True
            if elapsed > spec.budget_s:
                control.should_training_stop = True
            return control

    config = GRPOConfig(
        output_dir=str(run_dir),
        per_device_train_batch_size=spec.batch_samples,
        num_generations=spec.sampling.group_size,
        max_completion_length=spec.sampling.max_tokens,
        temperature=spec.sampling.temperature,
        learning_rate=spec.lr,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=2,
        adam_beta2=0.99,
        weight_decay=0.0,
        max_grad_norm=1.0,
        beta=0.0,
        epsilon=0.2,
        delta=4.0,
        loss_type="dr_grpo",
        scale_rewards="group",
        max_steps=spec.max_steps if spec.max_steps < 100_000 else 10_000,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        seed=0,
        dataloader_num_workers=0,
    )
    state["start"] = greedy_accuracy(model, tokenizer, task, spec.eval_problems, spec.sampling.max_tokens)
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward, args=config, train_dataset=dataset, processing_class=tokenizer,
        callbacks=[TargetAccuracy()],
    )
    state["begin"] = time.perf_counter()
    trainer.train()
    rl_s = time.perf_counter() - state["begin"]
    return RunResult(
        mode="trl", accuracy_start=state["start"], accuracy_end=state["accuracy"], steps=int(state["steps"]),
        rl_s=round(rl_s, 2), time_to_target_s=None if state["reached"] is None else round(state["reached"], 2),
        trainer_idle_fraction=None, samples_per_s=round(state["steps"] * spec.batch_samples / rl_s, 1),
        dropped_stale_groups=0, dropped_zero_advantage_groups=0, files_consumed=0,
    )


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description="sync vs async GRPO vs TRL on the CPU sort task")
    parser.add_argument("--quick", action="store_true", help="lower target and shorter budget per variant")
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="worker processes of the async variants")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = CpuRecipe()
    if args.quick:
        spec = replace(spec, target=0.6, budget_s=180.0)
    root = Path(tempfile.mkdtemp(prefix="bench-async-"))
    results: dict[str, RunResult] = {}
    trl_error = None
    results["sync"] = run_sync(spec, root / "sync")
    results["async1"] = run_async(spec, root / "async1", async_level=1, workers=args.workers)
    results["async2"] = run_async(spec, root / "async2", async_level=2, workers=args.workers)
    if not args.skip_trl:
        try:
            results["trl"] = run_trl(spec, root / "trl")
        except ImportError as exc:
            trl_error = f"trl not installed: {exc}"

    print(f"task {spec.task.name} {spec.task.params}, G={spec.sampling.group_size}, batch={spec.batch_samples}, "
          f"lr={spec.lr}, target accuracy {spec.target}, budget {spec.budget_s:.0f}s per variant, "
          f"{args.workers} worker process(es) per async run, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'variant':8} {'to target s':>12} {'final acc':>10} {'steps':>6} {'idle':>6} {'samples/s':>10} {'stale':>6} {'zero-adv':>9}")
    for name, r in results.items():
        idle = "—" if r.trainer_idle_fraction is None else f"{r.trainer_idle_fraction:.2f}"
        print(f"{name:8} {_fmt(r.time_to_target_s):>12} {r.accuracy_end:>10.3f} {r.steps:>6} "
              f"{idle:>6} {r.samples_per_s:>10.1f} {r.dropped_stale_groups:>6} {r.dropped_zero_advantage_groups:>9}")
    if trl_error:
        print(trl_error)

    def seconds(name: str) -> float | None:
        r = results.get(name)
        return None if r is None else r.time_to_target_s

    sync_s, async2_s, trl_s = seconds("sync"), seconds("async2"), seconds("trl")
    summary = {
        "sync_s": sync_s,
        "async1_s": seconds("async1"),
        "async2_s": async2_s,
        "trl_s": trl_s,
        "speedup_vs_sync": round(sync_s / async2_s, 2) if sync_s and async2_s else None,
        "speedup_vs_trl": round(trl_s / async2_s, 2) if trl_s and async2_s else None,
        "trainer_idle": results["async2"].trainer_idle_fraction,
        "final_accuracy": results["async2"].accuracy_end,
        "target": spec.target,
        "runs": {name: asdict(r) for name, r in results.items()},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
