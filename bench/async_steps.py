"""`python -m bench.async_steps MODE UPDATES CAP SEEDS [LR [MAX_STEPS]]`: steps to the quick target, per seed, for one variant.

An exploration helper of bench.async (issue 16): MODE is sync, async1 or async2; UPDATES is
optim.updates_per_step, CAP loss.is_weight_cap, SEEDS a comma-separated list of pool seeds.
Runs on 1 torch thread (sync) or trainer + 1 worker (async), target 0.6 (mean of the latest 3
evaluations), a 1,500 s budget and at most MAX_STEPS steps (default 150), so that steps to target are measured even on a loaded machine (its clocks are
not comparable: use bench.async for times). Prints one JSON line per seed, with the held-out
accuracy every 5 steps.
"""

import json
import sys
import tempfile
from pathlib import Path

import torch

from examples.cpu_run import CpuRecipe, run_async, run_sync
from bench.cleanup import exit_on_signals


def main() -> int:
    mode, updates, cap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    seeds = [int(x) for x in sys.argv[4].split(",")]
    lr = float(sys.argv[5]) if len(sys.argv) > 5 else CpuRecipe.lr
    max_steps = int(sys.argv[6]) if len(sys.argv) > 6 else 150
    torch.set_num_threads(1)
    for seed in seeds:
        spec = CpuRecipe(updates_per_step=updates, is_weight_cap=cap, seed=seed, target=0.6, budget_s=1500.0,
                         max_steps=max_steps, lr=lr)
        root = Path(tempfile.mkdtemp(prefix=f"steps-{mode}-u{updates}-"))
        r = run_sync(spec, root) if mode == "sync" else run_async(spec, root, async_level=int(mode[-1]), workers=1)
        accuracy = [json.loads(line)["accuracy"] for line in (root / "metrics.jsonl").read_text().splitlines()
                    if '"accuracy"' in line]
        print(json.dumps({"mode": mode, "updates_per_step": updates, "is_weight_cap": cap, "lr": lr, "seed": seed,
                          "steps": r.steps_to_target, "s": r.time_to_target_s, "clipped_fraction": r.clipped_fraction,
                          "is_weight_mean": r.is_weight_mean, "accuracy": accuracy}), flush=True)
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
