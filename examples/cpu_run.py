"""A GRPO run that learns on a CPU: `python -m examples.cpu_run [--minutes 10]`.

1. builds a ~1M-parameter char-level Llama and its tokenizer in code;
2. a short supervised warm start on the task format (a few dozen steps: the policy writes
   digit strings of the right shape but is mostly wrong);
3. RL: this process is the trainer (GRPO, async_level k); `--workers` separate
   `python -m worker.local_cli` processes generate rollout files. They meet only through
   the run folder: policy store, rollout files, the trainer's progress report;
4. greedy accuracy on held-out prompts every few steps; at the end metrics.jsonl,
   curve.png and summary.json in the run folder.

`--inference exact` runs it as an exact pool does (docs/protocol.md R5.7): the workers sample from each published
policy's integer form (inference.exact), the trainer trains the float weights, refuses to publish a policy that does
not quantise, and takes every row's logp_behav from the integer policy that sampled it (trainer/exact_behaviour.py).

`run_sync` is the synchronous reference (generate, then train, then generate, in one
process) used by bench.async and the learning smoke test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from inference.local_store import DONE_MARKER, LocalPolicyStore
from inference.tiny import build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from proofs.assignment import assign_prompts
from protocol.digest import Digest
from protocol.runspec import SamplingSpec
from protocol.submission import local_binding
from tasks.base import Task
from tasks.registry import TaskSpec, build_task
from trainer.config import ModelSpec, TrainerConfig
from trainer.evaluate import greedy_accuracy
from trainer.exact_behaviour import ExactBehaviour
from trainer.loop import Trainer, UnpublishablePolicy
from trainer.publish import quantise_problem
from trainer.warmstart import supervised_warm_start
from trainer.work_source import InMemorySource, LocalDirectorySource
from worker.produce import exact_backend
from worker.rollouts import make_rollouts

SYNC_WORKER = "0x" + "00" * 19 + "01"
SORT_TASK = TaskSpec(name="sort", seed=0, params={"min_digits": 3, "max_digits": 3, "test_fraction": 0.2})


@dataclass
class CpuRecipe:
    """One CPU learning run's recipe; every variant of bench.async shares it."""

    task: TaskSpec = field(default_factory=lambda: SORT_TASK)
    model: ModelSpec = field(default_factory=ModelSpec)
    warm_steps: int = 25
    warm_lr: float = 1e-3
    lr: float = 2.5e-4  # 5e-4 moved the policy so far per step that async2 needed ~3× the steps (docs/notes/grpo.md)
    entropy_coef: float = 0.0
    sampling: SamplingSpec = field(default_factory=lambda: SamplingSpec(group_size=16, max_tokens=8, temperature=1.0))
    prompts_per_file: int = 8
    batch_samples: int = 128
    eval_every: int = 5
    eval_problems: int = 200
    target: float = 0.8
    target_window: int = 3  # the target is reached when the mean of this many latest evaluations reaches it
    budget_s: float = 600.0
    max_steps: int = 100_000
    updates_per_step: int = 1  # optim.updates_per_step (2 was measured in bench.async and did not help: docs/notes/grpo.md)
    is_weight_cap: float = 2.0  # loss.is_weight_cap
    seed: int = 0  # the pool seed: which prompts are drawn and the sampling noise (the warm start is the same)
    warmup_steps: int = 10  # optim.warmup_steps
    inference: Literal["float", "exact"] = "float"  # exact: rollouts from each policy's integer form (R5.7)

    def trainer_overrides(self) -> list[str]:
        """`trainer start --set` assignments under which a pool's trainer trains as this recipe does (its task,
        model and sampling come from the pool's run spec and checkpoint)."""
        return [f"batch_samples={self.batch_samples}", f"optim.lr={self.lr}", f"optim.warmup_steps={self.warmup_steps}",
                f"optim.updates_per_step={self.updates_per_step}", f"loss.entropy_coef={self.entropy_coef}",
                f"loss.is_weight_cap={self.is_weight_cap}", f"seed={self.seed}"]

    @property
    def pool_seed(self) -> bytes:
        return self.seed.to_bytes(32, "big")

    def exact_parts(self) -> dict:
        """The Trainer arguments of an exact run (none for a float one): the quantisation check before each publish
        and logp_behav from the integer policies."""
        if self.inference != "exact":
            return {}
        return {"policy_check": quantise_problem, "exact_behaviour": ExactBehaviour(self.sampling.temperature)}

    def trainer_config(self, run_dir: Path, async_level: int) -> TrainerConfig:
        return TrainerConfig(
            run_dir=run_dir, task=self.task, model=self.model, async_level=async_level, max_steps=self.max_steps,
            sampling=self.sampling, batch_samples=self.batch_samples,
            optim={"lr": self.lr, "warmup_steps": self.warmup_steps, "updates_per_step": self.updates_per_step},
            loss={"entropy_coef": self.entropy_coef, "is_weight_cap": self.is_weight_cap},
            wait_timeout_s=120.0, poll_interval_s=0.005, checkpoint_every=10, seed=self.seed,
        )


@dataclass
class RunResult:
    """What a run reached and how fast. Every clock excludes held-out evaluation (`eval_s`)."""

    mode: str
    accuracy_start: float
    accuracy_end: float
    steps: int
    rl_s: float
    time_to_target_s: float | None
    trainer_idle_fraction: float | None
    samples_per_s: float  # consumed samples (taken in, not stale) per second of rl_s
    dropped_stale_groups: int
    dropped_zero_advantage_groups: int
    files_consumed: int
    steps_to_target: int | None = None
    eval_s: float = 0.0
    generate_s: float | None = None  # sync only: its phase times
    train_s: float | None = None
    consumed_samples: int = 0
    staleness_p50: float | None = None  # per consumed submission, in trainer steps
    staleness_p99: float | None = None
    clipped_fraction: float | None = None  # mean over steps
    is_weight_mean: float | None = None


class EvalClock:
    """Held-out accuracy as a trainer Evaluator, timing itself so runs can leave it off their clocks."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, task: Task, spec: CpuRecipe) -> None:
        self.tokenizer, self.task, self.spec = tokenizer, task, spec
        self.seconds = 0.0

    def __call__(self, model: PreTrainedModel) -> dict[str, float]:
        started = time.perf_counter()
        accuracy = greedy_accuracy(model, self.tokenizer, self.task, self.spec.eval_problems, self.spec.sampling.max_tokens)
        self.seconds += time.perf_counter() - started
        return {"accuracy": accuracy}


def percentile(values: list[int], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))  # ceil(q·n/100)
    return float(ordered[rank - 1])


class TargetTracker:
    """Whether held-out accuracy has reached the target: the mean of the latest ``window``
    evaluations, not one evaluation — a policy's greedy accuracy swings by ±0.1–0.2 between
    two evaluations five steps apart, so a first touch of the target measures that noise more
    than learning (docs/notes/grpo.md). Every variant of bench.async uses the same rule."""

    def __init__(self, target: float, window: int) -> None:
        self.target, self.window = target, max(1, window)
        self.history: list[float] = []

    def reached(self, accuracy: float) -> bool:
        """Record one evaluation; True once the latest ``window`` of them average ≥ target."""
        self.history.append(accuracy)
        latest = self.history[-self.window:]
        return len(latest) == self.window and sum(latest) / self.window >= self.target


def warm_policy(spec: CpuRecipe) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Task]:
    """A fresh policy after the supervised warm start (deterministic in the spec)."""
    torch.manual_seed(0)
    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(
        len(tokenizer), seed=spec.model.init_seed, hidden=spec.model.hidden, layers=spec.model.layers, heads=spec.model.heads
    )
    task = build_task(spec.task)
    supervised_warm_start(model, tokenizer, task, spec.warm_steps, batch_size=32, lr=spec.warm_lr, seed=0)
    return model, tokenizer, task


def write_run_toml(path: Path, config: TrainerConfig, prompts_per_file: int, pool_seed: bytes = bytes(32),
                   inference: str = "float") -> None:
    """The run's shared config: the trainer and every worker read the same file."""
    task = config.task
    params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in task.params.items())
    path.write_text(
        f'run_dir = "{config.run_dir}"\n'
        f'pool_seed = "{pool_seed.hex()}"\ninference = "{inference}"\n'
        f"batch_samples = {config.batch_samples}\n"
        f"async_level = {config.async_level}\nprompts_per_file = {prompts_per_file}\n"
        f"[sampling]\ngroup_size = {config.sampling.group_size}\nmax_tokens = {config.sampling.max_tokens}\n"
        f"temperature = {config.sampling.temperature}\n"
        f'[task]\nname = "{task.name}"\nseed = {task.seed}\nparams = {{ {params} }}\n'
    )


def _train_until_target(
    trainer: Trainer, spec: CpuRecipe, mode: str, log: bool, evals: EvalClock
) -> tuple[float | None, float, float]:
    """Step until the target accuracy, the budget or max_steps; (time to target, accuracy,
    seconds), every time without evaluation."""
    started, eval_before = time.perf_counter(), evals.seconds
    clock = lambda: time.perf_counter() - started - (evals.seconds - eval_before)  # noqa: E731
    accuracy = _last_accuracy(trainer)
    reached, tracker = None, TargetTracker(spec.target, spec.target_window)
    while trainer.step < trainer.config.max_steps and clock() < spec.budget_s:
        m = trainer.train_step()
        if trainer.step % spec.eval_every:
            continue
        accuracy = _last_accuracy(trainer)
        if log:
            print(
                f"[{mode}] step {trainer.step:4d}  t={clock():6.1f}s  batch reward {m.batch_reward:.3f}  "
                f"accuracy {accuracy:.3f}  entropy {m.entropy:.3f}  staleness {m.staleness_mean:.2f}  "
                f"IS weight {m.is_weight_mean:.3f}  idle {m.idle_s:.2f}s",
                flush=True,
            )
        if tracker.reached(accuracy):
            reached = clock()
            break
    return reached, accuracy, clock()


def _last_accuracy(trainer: Trainer) -> float:
    lines = trainer.metrics_path.read_text().splitlines()
    return next(json.loads(line)["accuracy"] for line in reversed(lines) if "accuracy" in line)


def _result(mode: str, trainer: Trainer, spec: CpuRecipe, start: float, end: float, reached: float | None,
            rl_s: float, eval_s: float) -> RunResult:
    rows = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines() if '"loss"' in line]
    per_file = spec.prompts_per_file * spec.sampling.group_size
    consumed = sum((r["files_consumed"] - r["rejected_files"]) * per_file - r["dropped_stale_groups"] * spec.sampling.group_size
                   for r in rows)
    staleness = [s for r in rows for s in r["submission_staleness"]]
    return RunResult(
        mode=mode,
        accuracy_start=start,
        accuracy_end=end,
        steps=trainer.step,
        rl_s=round(rl_s, 2),
        time_to_target_s=None if reached is None else round(reached, 2),
        trainer_idle_fraction=round(sum(r["idle_s"] for r in rows) / max(rl_s, 1e-9), 4),
        samples_per_s=round(consumed / max(rl_s, 1e-9), 1),
        dropped_stale_groups=sum(r["dropped_stale_groups"] for r in rows),
        dropped_zero_advantage_groups=sum(r["dropped_zero_advantage_groups"] for r in rows),
        files_consumed=sum(r["files_consumed"] for r in rows),
        steps_to_target=trainer.step if reached is not None else None,
        eval_s=round(eval_s, 2),
        consumed_samples=consumed,
        staleness_p50=percentile(staleness, 50),
        staleness_p99=percentile(staleness, 99),
        clipped_fraction=round(sum(r["clipped_fraction"] for r in rows) / max(len(rows), 1), 4),
        is_weight_mean=round(sum(r["is_weight_mean"] for r in rows) / max(len(rows), 1), 4),
    )


def run_sync(spec: CpuRecipe, run_dir: Path, log: bool = False) -> RunResult:
    """Synchronous GRPO in one process: generate a batch with the current policy, train
    on it, generate again. Generation and training never overlap; idle is the time the
    trainer spends waiting for generation. Its phase times (generate_s, train_s) bound what
    overlapping them could gain."""
    model, tokenizer, task = warm_policy(spec)
    config = spec.trainer_config(run_dir, async_level=0)
    source = InMemorySource()
    evals = EvalClock(tokenizer, task, spec)
    trainer = Trainer(config, model, source, evaluate=evals, eval_every=spec.eval_every, **spec.exact_parts())
    trainer.start()
    start = _last_accuracy(trainer)
    files, gen_s = 0, 0.0
    started, eval_before = time.perf_counter(), evals.seconds
    clock = lambda: time.perf_counter() - started - (evals.seconds - eval_before)  # noqa: E731
    reached, end, tracker = None, start, TargetTracker(spec.target, spec.target_window)
    while trainer.step < config.max_steps and clock() < spec.budget_s:
        t0 = time.perf_counter()
        # the policy changes only at train_step: its integer form is quantised once a step, not once a file
        backend = exact_backend(model, tokenizer) if spec.inference == "exact" else TorchBackend(model)
        while not trainer.ready():
            indices = assign_prompts(spec.pool_seed, SYNC_WORKER, files, 2**62, spec.prompts_per_file)
            batch = make_rollouts(backend, tokenizer, task, spec.task, indices, spec.sampling,
                                  local_binding(SYNC_WORKER, trainer.step, files), Digest(bytes(32)),
                                  pool_seed=spec.pool_seed, prove=spec.inference != "exact")
            source.put(f"{files:06d}", batch)
            files += 1
        gen_s += time.perf_counter() - t0
        trainer.train_step()
        if trainer.step % spec.eval_every == 0:
            end = _last_accuracy(trainer)
            if log:
                print(f"[sync] step {trainer.step:4d}  t={clock():6.1f}s  accuracy {end:.3f}", flush=True)
            if tracker.reached(end):
                reached = clock()
                break
    rl_s = clock()
    result = _result("sync", trainer, spec, start, end, reached, rl_s, evals.seconds - eval_before)
    result.trainer_idle_fraction = round(gen_s / max(rl_s, 1e-9), 4)
    result.generate_s, result.train_s = round(gen_s, 2), round(rl_s - gen_s, 2)
    return result


def run_async(spec: CpuRecipe, run_dir: Path, async_level: int, workers: int = 1, log: bool = False,
              worker_threads: int = 1) -> RunResult:
    """This process trains; `workers` worker processes of `worker_threads` torch threads each
    generate; they share only run_dir. With async_level 0 the workers generate only while the
    trainer waits (the synchronous baseline on the same processes), and the result carries its
    phase times."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    config = spec.trainer_config(run_dir, async_level=async_level)
    write_run_toml(run_dir / "run.toml", config, spec.prompts_per_file, spec.pool_seed, spec.inference)
    # Workers start first: they load torch during the warm start and wait for policy 0,
    # so the RL clock (started after publishing policy 0) does not count their start-up.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "worker.local_cli", "--config", str(run_dir / "run.toml"), "--address", "0x" + f"{i + 1:040x}",
             "--threads", str(worker_threads)],
            env=env, stdout=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    try:
        model, tokenizer, task = warm_policy(spec)
        evals = EvalClock(tokenizer, task, spec)
        trainer = Trainer(
            config, model, LocalDirectorySource(run_dir / "rollouts"),
            publishers=[LocalPolicyStore(run_dir / "policy", model.config, tokenizer)],
            evaluate=evals, eval_every=spec.eval_every, **spec.exact_parts(),
        )
        trainer.start()
        start = _last_accuracy(trainer)
        eval_before = evals.seconds
        reached, end, rl_s = _train_until_target(trainer, spec, f"async{async_level}", log, evals)
    finally:
        (run_dir / DONE_MARKER).touch()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    result = _result(f"async{async_level}" if async_level else "sync (trainer + workers)", trainer, spec, start, end,
                     reached, rl_s, evals.seconds - eval_before)
    if async_level == 0:  # generation and training never overlap: the trainer's waits are the generation phase
        idle = sum(json.loads(line)["idle_s"] for line in trainer.metrics_path.read_text().splitlines()
                   if '"loss"' in line)
        result.generate_s, result.train_s = round(idle, 2), round(rl_s - idle, 2)
    return result


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
        points = [(r["step"], r[key]) for r in data if r.get(key) is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="." if key == "accuracy" else None)
        ax.set_title(title)
        ax.set_xlabel("trainer step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description="GRPO on a CPU: warm start, then RL with separate worker processes.")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/cpu"))
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget for the RL phase")
    parser.add_argument("--target", type=float, default=0.8,
                        help="stop once held-out greedy accuracy (mean of the latest --target-window evaluations) reaches this")
    parser.add_argument("--target-window", type=int, default=CpuRecipe.target_window,
                        help="evaluations averaged for the target (1: the first evaluation that reaches it)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--async-level", type=int, default=2)
    parser.add_argument("--warm-steps", type=int, default=CpuRecipe.warm_steps)
    parser.add_argument("--lr", type=float, default=CpuRecipe.lr)
    parser.add_argument("--is-weight-cap", type=float, default=CpuRecipe.is_weight_cap, help="loss.is_weight_cap")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the recipe's)")
    parser.add_argument("--seed", type=int, default=CpuRecipe.seed, help="pool seed: prompts drawn and sampling noise")
    parser.add_argument("--inference", choices=["float", "exact"], default=CpuRecipe.inference,
                        help="rollouts from the float policy, or from each policy's integer form (an exact pool's)")
    args = parser.parse_args()
    if args.temperature is not None and args.temperature <= 0:
        parser.error(f"--temperature must be > 0 (GRPO learns from sampled groups), got {args.temperature}")
    if args.is_weight_cap < 1:
        parser.error(f"--is-weight-cap must be >= 1, got {args.is_weight_cap}")

    torch.set_num_threads(1)
    spec = CpuRecipe(warm_steps=args.warm_steps, lr=args.lr, target=args.target, seed=args.seed,
                      is_weight_cap=args.is_weight_cap, inference=args.inference,
                      target_window=args.target_window, budget_s=args.minutes * 60)
    if args.temperature is not None:
        spec.sampling = spec.sampling.model_copy(update={"temperature": args.temperature})
    wall = time.perf_counter()
    try:
        result = run_async(spec, args.run_dir, args.async_level, args.workers, log=True)
    except UnpublishablePolicy as exc:  # --inference exact: a step trained past the integer policy's bounds
        print(f"error: {exc}", file=sys.stderr)
        return 1
    plot(args.run_dir / "metrics.jsonl", args.run_dir / "curve.png")
    summary = {**asdict(result), "inference": spec.inference, "seed": spec.seed, "task": spec.task.model_dump(),
               "workers": args.workers, "total_wall_s": round(time.perf_counter() - wall, 1), "load_average": os.getloadavg()}
    (args.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return 0 if result.time_to_target_s is not None else 1


if __name__ == "__main__":
    sys.exit(main())
