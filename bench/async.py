"""`python -m bench.async [--quick]`: synchronous vs asynchronous GRPO vs TRL's GRPOTrainer.

Every variant starts from the same warm-started policy and uses the same task, group size,
batch, learning rate and token limit, and runs until held-out greedy accuracy reaches the
target (or the time budget ends). "Reaches" means the mean of the latest `--target-window`
evaluations (default 3, every 5 steps) — one evaluation's accuracy swings by ±0.1–0.2 between
two evaluations, so its first touch of the target measured noise more than learning.

Core budget (`--cores N`, default 2): every variant runs on the same N cores — the bench pins
itself (and so every process it starts) to N of the machine's cores.

  sync        the protocol's synchronous mode (async_level 0) with the layout of the async
              variants: a trainer process (1 thread) and `--workers` worker processes (1 thread
              each, default N − 1); a worker generates only while the trainer waits for rollouts
              and the trainer trains only on rollouts of its current policy, so generation and
              training never overlap — the distributed system's own synchronous baseline, where
              trainer and workers are separate machines;
  async1      the same processes, async_level 1: workers generate while the trainer trains;
  async2      the same, async_level 2;
  sync_1proc  one process with N torch threads: generate a batch, train on it, generate again;
              both phases use all N cores (only possible when trainer and generator share
              the machine);
  trl         trl.GRPOTrainer in one process with N threads (its own generate-then-train loop),
              configured as closely as it allows: same G, batch, ε, δ, no KL, constant token
              normalisation (dr_grpo); a sweep over 3 learning rates, its best is reported.

Clocks: from the first RL generation to the step whose held-out greedy accuracy reaches the
target, minus the time spent in that evaluation (evaluation is off every clock alike; the
async workers keep generating while the trainer evaluates, at most their pacing window of
async_level steps ahead). samples/s counts consumed samples only: rollouts the trainer took
in and did not drop as stale or mis-sampled (informative or not).

The overlap limit `1 + min(gen, train) / max(gen, train)` comes from the sync run's phase
times (gen: the trainer waiting for rollouts, train: the rest): the speedup that perfectly
overlapping its generation and training would give on the same processes and cores. Each async
variant's speedup over sync is also reported as a fraction of it. The same figures against
sync_1proc are reported too (`*_1proc` keys): there both phases already use every core, so
overlapping them cannot add cores, only save what the one-process loop loses to threading.

Seeds (`--seeds N`, default 3 with `--quick`, else 1): every variant except TRL runs once per
seed (the pool seed: which prompts are drawn and the sampling noise; the warm-started policy is
the same). Steps and seconds to target are medians over the seeds (a run that misses the target
counts as +∞), so `steps_ratio` = median async2 steps / median sync steps, and each run's figure
is listed next to it. TRL runs on seed 0 only; with `--quick` only at the sweep's best learning
rate (5e-5: the other two collapse and spend the whole budget).

Prints a table, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from cli.errors import EXIT_USAGE
from examples.cpu_run import CpuRecipe, RunResult, TargetTracker, run_async, run_sync, warm_policy
from tasks.encoding import encode_prompt
from trainer.evaluate import greedy_accuracy

TRL_LEARNING_RATES = (5e-4, 1.5e-4, 5e-5)


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

    tracker = TargetTracker(spec.target, spec.target_window)
    state = {"start": 0.0, "reached": None, "accuracy": 0.0, "steps": 0, "begin": time.perf_counter(),
             "eval_s": 0.0, "reached_steps": None}

    class TargetAccuracy(TrainerCallback):
        def on_step_end(self, args, trainer_state, control, **kwargs):  # type: ignore[no-untyped-def]
            state["steps"] = trainer_state.global_step
            if trainer_state.global_step % spec.eval_every == 0:
                eval_started = time.perf_counter()
                model.eval()
                state["accuracy"] = greedy_accuracy(model, tokenizer, task, spec.eval_problems, spec.sampling.max_tokens)
                model.train()
                state["eval_s"] += time.perf_counter() - eval_started
                if tracker.reached(state["accuracy"]):
                    state["reached"] = time.perf_counter() - state["begin"] - state["eval_s"]
                    state["reached_steps"] = trainer_state.global_step
                    control.should_training_stop = True
            if time.perf_counter() - state["begin"] - state["eval_s"] > spec.budget_s:
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
    rl_s = time.perf_counter() - state["begin"] - state["eval_s"]
    return RunResult(
        mode=f"trl lr={spec.lr:g}", accuracy_start=state["start"], accuracy_end=state["accuracy"],
        steps=int(state["steps"]), rl_s=round(rl_s, 2),
        time_to_target_s=None if state["reached"] is None else round(state["reached"], 2),
        trainer_idle_fraction=None, samples_per_s=round(state["steps"] * spec.batch_samples / rl_s, 1),
        dropped_stale_groups=0, dropped_zero_advantage_groups=0, files_consumed=0,
        steps_to_target=state["reached_steps"], eval_s=round(state["eval_s"], 2),
        consumed_samples=int(state["steps"]) * spec.batch_samples,
    )


def best_trl(runs: list[RunResult]) -> RunResult:
    """The sweep's best: fastest to the target, else the highest final accuracy."""
    return min(runs, key=lambda r: (r.time_to_target_s is None, r.time_to_target_s or 0.0, -r.accuracy_end))


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _ratio(a: float | None, b: float | None, digits: int = 2) -> float | None:
    return round(a / b, digits) if a and b else None


def median_of(values: list[float | int | None]) -> float | None:
    """Median with None (target missed) as +∞; None when the median itself is a miss."""
    if not values:
        return None
    m = statistics.median([math.inf if v is None else v for v in values])
    return None if math.isinf(m) else m


def summarise(results: dict[str, list[RunResult]], trl_runs: list[RunResult], spec: CpuRecipe, cores: int,
              sync_threads: int, workers: int) -> dict:
    """The JSON line: the issue's keys first (medians over the seeds), then the details."""
    def med(name: str, key: str) -> float | None:
        return median_of([getattr(r, key) for r in results[name]])

    def limit(name: str) -> float | None:
        gen = sum(r.generate_s or 0.0 for r in results[name])
        train = sum(r.train_s or 0.0 for r in results[name])
        return round(1 + min(gen, train) / max(gen, train), 3) if max(gen, train) > 0 else None

    overlap_limit = limit("sync")
    sync_s, async1_s, async2_s = (med(n, "time_to_target_s") for n in ("sync", "async1", "async2"))
    one_proc_s, one_proc_steps = med("sync_1proc", "time_to_target_s"), med("sync_1proc", "steps_to_target")
    sync_steps, async1_steps, async2_steps = (med(n, "steps_to_target") for n in ("sync", "async1", "async2"))
    speedup1 = _ratio(sync_s, async1_s)
    speedup2 = _ratio(sync_s, async2_s)
    trl = best_trl(trl_runs) if trl_runs else None
    return {
        "sync_s": sync_s,
        "async1_s": async1_s,
        "async2_s": async2_s,
        "sync_steps": sync_steps,
        "async2_steps": async2_steps,
        "steps_ratio": _ratio(async2_steps, sync_steps),
        "overlap_limit": overlap_limit,
        "speedup_vs_sync": speedup2,
        "final_accuracy": median_of([r.accuracy_end for r in results["async2"]]),
        "trl_s": None if trl is None else trl.time_to_target_s,
        "async1_steps": async1_steps,
        "async1_steps_ratio": _ratio(async1_steps, sync_steps),
        "async1_speedup_vs_sync": speedup1,
        "speedup_fraction_of_limit": {"async1": _ratio(speedup1, overlap_limit, 3),
                                      "async2": _ratio(speedup2, overlap_limit, 3)},
        "sync_1proc_s": one_proc_s,
        "sync_1proc_steps": one_proc_steps,
        "steps_ratio_1proc": _ratio(async2_steps, one_proc_steps),
        "overlap_limit_1proc": limit("sync_1proc"),
        "speedup_vs_sync_1proc": _ratio(one_proc_s, async2_s),
        "async1_speedup_vs_sync_1proc": _ratio(one_proc_s, async1_s),
        "seeds": len(results["sync"]),
        "per_seed": {name: {"steps": [r.steps_to_target for r in runs], "s": [r.time_to_target_s for r in runs],
                            "final_accuracy": [r.accuracy_end for r in runs]} for name, runs in results.items()},
        "clipped_fraction": {name: [r.clipped_fraction for r in runs] for name, runs in results.items()},
        "is_weight_mean": {name: [r.is_weight_mean for r in runs] for name, runs in results.items()},
        "staleness_p50_p99": {name: [[r.staleness_p50, r.staleness_p99] for r in runs] for name, runs in results.items()},
        "trl_sweep": {r.mode: [r.time_to_target_s, r.accuracy_end] for r in trl_runs},
        "updates_per_step": spec.updates_per_step,
        "is_weight_cap": spec.is_weight_cap,
        "target": spec.target,
        "target_window": spec.target_window,
        "cores": cores,
        "sync_threads": sync_threads,
        "async_workers": workers,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "runs": {f"{name}/seed{r_i}": asdict(r) for name, runs in results.items() for r_i, r in enumerate(runs)}
        | {r.mode: asdict(r) for r in trl_runs},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="sync vs async GRPO vs TRL on the CPU sort task, on the same cores")
    parser.add_argument("--quick", action="store_true", help="lower target (0.6) and 180 s budget per variant")
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--cores", type=int, default=2,
                        help="core budget of every variant (the bench pins itself to that many cores): sync_1proc/TRL "
                             "threads; sync/async: 1 trainer thread + --workers one-thread workers")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes of the sync and async variants (default --cores − 1)")
    parser.add_argument("--sync-threads", type=int, default=None,
                        help="torch threads of the one-process variants (sync_1proc, TRL); default --cores. On a machine "
                             "other jobs load, 2 intra-op threads can stall each other (see docs/notes/grpo.md)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="runs per variant (pool seeds 0..N−1); default 3 with --quick, else 1")
    parser.add_argument("--updates-per-step", type=int, default=CpuRecipe.updates_per_step,
                        help="optim.updates_per_step of every variant (PPO-style mini-batch updates per step)")
    parser.add_argument("--is-weight-cap", type=float, default=CpuRecipe.is_weight_cap, help="loss.is_weight_cap")
    parser.add_argument("--lr", type=float, default=CpuRecipe.lr)
    parser.add_argument("--target-window", type=int, default=CpuRecipe.target_window,
                        help="evaluations averaged for the target (1: the first evaluation that reaches it)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="seconds per run before giving up (default 180 with --quick, else 600)")
    parser.add_argument("--variants", default="async1,async2,sync_1proc",
                        help="comma-separated subset of async1,async2,sync_1proc (sync always runs: the others are "
                             "compared to it)")
    add_record_option(parser)
    args = parser.parse_args()
    if args.cores < 2:
        print("error: --cores must be at least 2 (an async run needs a trainer and a worker process)")
        return EXIT_USAGE
    available = sorted(os.sched_getaffinity(0))
    if args.cores > len(available):
        print(f"error: --cores {args.cores} but this process may use only {len(available)} cores")
        return EXIT_USAGE
    os.sched_setaffinity(0, available[: args.cores])  # the worker processes inherit it
    workers = args.workers or args.cores - 1
    sync_threads = args.sync_threads or args.cores
    seeds = args.seeds if args.seeds is not None else (3 if args.quick else 1)
    spec = CpuRecipe(updates_per_step=args.updates_per_step, is_weight_cap=args.is_weight_cap, lr=args.lr,
                     target_window=args.target_window)
    if args.quick:
        spec = replace(spec, target=0.6, budget_s=180.0)
    if args.budget_s is not None:
        spec = replace(spec, budget_s=args.budget_s)
    variants = {"sync"} | set(args.variants.split(","))
    root = Path(tempfile.mkdtemp(prefix="bench-async-"))
    load_start = os.getloadavg()[0]
    results: dict[str, list[RunResult]] = {"sync": [], "async1": [], "async2": [], "sync_1proc": []}
    for seed in range(seeds):
        seeded = replace(spec, seed=seed)
        torch.set_num_threads(1)
        for level in (0, 1, 2):
            name = f"async{level}" if level else "sync"
            if name in variants:
                results[name].append(run_async(seeded, root / f"{name}-{seed}", async_level=level, workers=workers))
        if "sync_1proc" in variants:
            torch.set_num_threads(sync_threads)
            results["sync_1proc"].append(run_sync(seeded, root / f"sync_1proc-{seed}"))
        print(f"seed {seed}: " + ", ".join(f"{n} {rs[-1].steps_to_target} steps / {rs[-1].time_to_target_s} s"
                                           for n, rs in results.items() if rs), flush=True)
    trl_runs: list[RunResult] = []
    trl_error = None
    if not args.skip_trl:
        torch.set_num_threads(sync_threads)
        try:
            for lr in TRL_LEARNING_RATES[-1:] if args.quick else TRL_LEARNING_RATES:
                trl_runs.append(run_trl(replace(spec, lr=lr), root / f"trl-{lr:g}"))
        except ImportError as exc:
            trl_error = f"trl not installed: {exc}"

    print(f"task {spec.task.name} {spec.task.params}, G={spec.sampling.group_size}, batch={spec.batch_samples}, "
          f"lr={spec.lr}, updates/step {spec.updates_per_step}, IS cap {spec.is_weight_cap}, "
          f"target accuracy {spec.target}, budget {spec.budget_s:.0f}s per variant, {seeds} seed(s), "
          f"{args.cores} cores per variant (sync_1proc/TRL {sync_threads} thread(s); sync/async trainer + {workers} worker(s)), load average {load_start:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'variant':14} {'to target s':>12} {'steps':>6} {'final acc':>10} {'idle':>6} {'samples/s':>10} "
          f"{'stale':>6} {'zero-adv':>9} {'staleness p50/p99':>18} {'clipped':>8} {'eval s':>7}")
    rows = [(f"{name}/{i}", r) for name, runs in results.items() for i, r in enumerate(runs)]
    for name, r in rows + [(r.mode, r) for r in trl_runs]:
        idle = "—" if r.trainer_idle_fraction is None else f"{r.trainer_idle_fraction:.2f}"
        stale = "—" if r.staleness_p50 is None else f"{r.staleness_p50:.0f} / {r.staleness_p99:.0f}"
        steps = "—" if r.steps_to_target is None else str(r.steps_to_target)
        clipped = "—" if r.clipped_fraction is None else f"{r.clipped_fraction:.3f}"
        print(f"{name:14} {_fmt(r.time_to_target_s):>12} {steps:>6} {r.accuracy_end:>10.3f} {idle:>6} "
              f"{r.samples_per_s:>10.1f} {r.dropped_stale_groups:>6} {r.dropped_zero_advantage_groups:>9} "
              f"{stale:>18} {clipped:>8} {r.eval_s:>7.1f}")
    for name in ("sync", "sync_1proc"):
        print(f"{name} phases (generate s, train s): " + ", ".join(f"{r.generate_s} / {r.train_s}" for r in results[name]))
    if trl_error:
        print(trl_error)
    emit(summarise(results, trl_runs, spec, args.cores, sync_threads, workers), args, "async")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
