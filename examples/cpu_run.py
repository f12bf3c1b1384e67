"""A GRPO run that learns on a CPU: `python -m examples.cpu_run [--minutes 10]`.

1. builds a ~1M-parameter char-level Llama and its tokenizer in code;
2. a short supervised warm start on the task format (few steps: the policy writes sorted-
   looking digit strings but is mostly wrong);
3. RL: this process is the trainer (GRPO, async_level k), `--workers` separate
   `worker.local_cli` processes generate rollout files; they meet only through the
   run folder (policy store, rollout files, progress report);
4. greedy accuracy on held-out prompts every few steps; at the end metrics.jsonl,
   curve.png and summary.json in the run folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from inference.tiny import build_char_tokenizer, build_tiny_llama
from ledger_client.local_store import LocalPolicyStore
from tasks.registry import TaskSpec, build_task
from trainer.config import ModelSpec, TrainerConfig
from trainer.loop import Trainer
from trainer.warmstart import supervised_warm_start
from trainer.work_source import LocalDirectorySource
from worker.local_cli import DONE_MARKER
from worker.rollouts import greedy_accuracy

TASK = TaskSpec(name="sort", seed=0, params={"min_digits": 3, "max_digits": 4})
EVAL_PROBLEMS = 200


def write_toml(path: Path, config: TrainerConfig, prompts_per_file: int) -> None:
    """The run's shared config: the trainer and every worker read the same file."""
    task = config.task
    params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in task.params.items())
    path.write_text(
        f'run_dir = "{config.run_dir}"\n'
        f"group_size = {config.group_size}\nbatch_samples = {config.batch_samples}\n"
        f"max_tokens = {config.max_tokens}\ntemperature = {config.temperature}\n"
        f"async_level = {config.async_level}\nprompts_per_file = {prompts_per_file}\n"
        f'[task]\nname = "{task.name}"\nseed = {task.seed}\nparams = {{ {params} }}\n'
    )


def plot(metrics_path: Path, out: Path) -> None:
    """Reward, held-out accuracy, entropy and staleness per step, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "accuracy" in r]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    panels = [
        (axes[0][0], train, "reward", "mean reward of consumed rollouts"),
        (axes[0][1], evals, "accuracy", "greedy accuracy, held-out prompts"),
        (axes[1][0], train, "entropy", "policy entropy (nats/token)"),
        (axes[1][1], train, "staleness_mean", "staleness (trainer step − policy step)"),
    ]
    for ax, data, key, title in panels:
        ax.plot([r["step"] for r in data], [r[key] for r in data], marker="." if key == "accuracy" else None)
        ax.set_title(title)
        ax.set_xlabel("trainer step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("runs/cpu"))
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget for the RL phase")
    parser.add_argument("--target", type=float, default=0.8, help="stop early once held-out accuracy reaches this")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--async-level", type=int, default=2)
    parser.add_argument("--warmup-steps", type=int, default=80, help="supervised warm-start steps")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--entropy-coef", type=float, default=0.0)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=100_000)
    args = parser.parse_args()

    torch.set_num_threads(1)
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    args.run_dir.mkdir(parents=True)
    run_start = time.perf_counter()

    tokenizer = build_char_tokenizer()
    spec = ModelSpec()
    model = build_tiny_llama(len(tokenizer), seed=spec.init_seed, hidden=spec.hidden, layers=spec.layers, heads=spec.heads)
    task = build_task(TASK)
    supervised_warm_start(model, tokenizer, task, args.warmup_steps, batch_size=32, lr=3e-3, seed=0)
    warm_s = time.perf_counter() - run_start

    config = TrainerConfig(
        run_dir=args.run_dir, task=TASK, model=spec, async_level=args.async_level, max_steps=args.max_steps,
        optim={"lr": args.lr, "warmup_steps": 2}, loss={"entropy_coef": args.entropy_coef},
    )
    write_toml(args.run_dir / "run.toml", config, prompts_per_file=8)
    evaluate = lambda m: {"accuracy": greedy_accuracy(m, tokenizer, task, EVAL_PROBLEMS, config.max_tokens)}  # noqa: E731
    trainer = Trainer(
        config, model, LocalDirectorySource(args.run_dir / "rollouts"),
        publishers=[LocalPolicyStore(args.run_dir / "policy", model.config, tokenizer)],
        evaluate=evaluate, eval_every=args.eval_every,
    )
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "worker.local_cli", "--config", str(args.run_dir / "run.toml"),
             "--address", "0x" + f"{i + 1:040x}"],
            env=env,
        )
        for i in range(args.workers)
    ]
    start_accuracy = None
    reached_s = None
    rl_start = time.perf_counter()
    accuracy = 0.0
    try:
        trainer.start()
        start_accuracy = accuracy = json.loads(trainer.metrics_path.read_text().splitlines()[0])["accuracy"]
        print(f"warm start: {args.warmup_steps} steps, {warm_s:.1f}s, held-out accuracy {start_accuracy:.3f}", flush=True)
        while trainer.step < config.max_steps and time.perf_counter() - rl_start < args.minutes * 60:
            m = trainer.train_step()
            if trainer.step % args.eval_every == 0:
                accuracy = json.loads(trainer.metrics_path.read_text().splitlines()[-1])["accuracy"]
                print(
                    f"step {trainer.step:4d}  t={time.perf_counter() - rl_start:6.1f}s  reward {m.reward:.3f}  "
                    f"accuracy {accuracy:.3f}  entropy {m.entropy:.3f}  staleness {m.staleness_mean:.2f}  "
                    f"idle {m.idle_s:.2f}s",
                    flush=True,
                )
                if accuracy >= args.target and reached_s is None:
                    reached_s = time.perf_counter() - rl_start
                    break
    finally:
        (args.run_dir / DONE_MARKER).touch()
        for w in workers:
            try:
                w.wait(timeout=60)
            except subprocess.TimeoutExpired:
                w.kill()
    rows = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines() if line.strip()]
    train_rows = [r for r in rows if "loss" in r]
    rl_s = time.perf_counter() - rl_start
    summary = {
        "task": TASK.model_dump(),
        "async_level": args.async_level,
        "workers": args.workers,
        "warm_start_steps": args.warmup_steps,
        "warm_start_s": round(warm_s, 1),
        "accuracy_start": start_accuracy,
        "accuracy_end": accuracy,
        "steps": trainer.step,
        "rl_s": round(rl_s, 1),
        "time_to_target_s": None if reached_s is None else round(reached_s, 1),
        "trainer_idle_fraction": round(sum(r["idle_s"] for r in train_rows) / max(rl_s, 1e-9), 3),
        "dropped_stale_groups": sum(r["dropped_stale_groups"] for r in train_rows),
        "dropped_zero_advantage_groups": sum(r["dropped_zero_advantage_groups"] for r in train_rows),
        "files_consumed": sum(r["files_consumed"] for r in train_rows),
        "load_average": os.getloadavg(),
    }
    (args.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(trainer.metrics_path, args.run_dir / "curve.png")
    print(json.dumps(summary))
    return 0 if reached_s is not None else 1


if __name__ == "__main__":
    sys.exit(main())
