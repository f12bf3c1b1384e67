"""Does bf16 logit noise scale with the logits? `python -m bench.noise_scale [--files N] [--warm-steps 25,100]`.

The pool's per-token bound is absolute: `logit_tolerance`, which `validator calibrate` sets from the worst honest
deviation it sees. On a sharper policy that worst case grows (bench.attacks: 0.020 after 25 warm steps, 0.189
after 100), and every position then admits the tokens within twice that of the best — room to steer. A bound
relative to a per-position logit scale would be tighter if the noise were proportional to that scale.

This measures it on bench.attacks' pool (examples/run-attacks.toml, the tiny policy warm-started for each
`--warm-steps`): honest float32 completions are prefilled by the validator's float32 backend and by a bf16
worker's; per position, the deviation is the largest |logit difference| over the vocabulary. Positions are split in
two halves: the tolerance is fitted on one (the worst deviation, absolute or divided by the position's scale) and
judged on the other by its false positives (deviations above it) and by how often it admits a second token (the
seeded scores' top-two gap at T = 1 below twice the tolerance: the steering room). Printed per policy and scale;
the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from bench.cleanup import exit_on_signals
from bench.attacks import ATTACK_WARM_STEPS, STEERING_WARM_STEPS, Lab, build_checkpoint
from bench.report import add_record_option, emit
from proofs.sampling import gumbel_noise
from protocol.runspec import load_run_spec

ROOT = Path(__file__).resolve().parent.parent
SCALES = {
    "max |logit|": lambda l: l.abs().max(dim=1).values,
    "max - mean": lambda l: l.max(dim=1).values - l.mean(dim=1),
    "std": lambda l: l.std(dim=1),
    "rms": lambda l: l.pow(2).mean(dim=1).sqrt(),
}


def deviations(lab: Lab, files: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The validator's float32 logits at every completion position of `files` honest files, and each position's
    largest |bf16 − float32| difference."""
    contexts = lab.honest_contexts(files)
    reference = torch.cat([p.logits.float() for p in lab.validator.prefill_batch(contexts)])
    _, bf16 = lab.worker("bfloat16")
    worker = torch.cat([p.logits.float() for p in bf16.prefill_batch(contexts)])
    return reference, (worker - reference).abs().max(dim=1).values


def judge(deviation: torch.Tensor, gap: torch.Tensor, scale: torch.Tensor, fit: torch.Tensor, held: torch.Tensor) -> dict:
    """Fit `deviation / scale` on the `fit` positions (worst case); on the `held` ones, its false positives and the
    fraction of positions whose top-two gap it admits."""
    ratio = float((deviation[fit] / scale[fit]).max())
    tolerance = ratio * scale
    result = {"fitted": round(ratio, 6), "median_tolerance": round(float(tolerance[held].median()), 5),
              "false_positives": int((deviation[held] > tolerance[held]).sum()),
              "second_token_admitted": round(float((gap[held] < 2 * tolerance[held]).float().mean()), 4)}
    if float(scale.std()) > 0:  # the absolute tolerance's scale is constant
        result["correlation"] = round(float(torch.corrcoef(torch.stack([deviation, scale]))[0, 1]), 3)
    return result


def measure(spec_path: Path, warm_steps: int, files: int, seed: int) -> dict:
    spec = load_run_spec(spec_path)
    with tempfile.TemporaryDirectory(prefix="noise-scale-") as workdir:
        lab = Lab(build_checkpoint(spec, Path(workdir) / "checkpoint", warm_steps=warm_steps), spec)
        reference, deviation = deviations(lab, files)
    n, vocab = reference.shape
    noise = gumbel_noise(torch.arange(n), torch.zeros(n, dtype=torch.long), vocab)
    top2 = (reference / spec.sampling.temperature + noise).topk(2, dim=1).values
    gap = (top2[:, 0] - top2[:, 1]) * spec.sampling.temperature  # in logits, as the tolerance is
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    fit, held = order[: n // 2], order[n // 2:]
    result = {"warm_steps": warm_steps, "positions": n, "vocab": vocab,
              "deviation": {"median": round(float(deviation.median()), 6),
                            "p99": round(float(deviation.quantile(0.99)), 6), "max": round(float(deviation.max()), 6)},
              "absolute": judge(deviation, gap, torch.ones(n), fit, held)}
    result["relative"] = {name: judge(deviation, gap, scale(reference), fit, held) for name, scale in SCALES.items()}
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=24, help="honest files per policy (64 completions each)")
    p.add_argument("--warm-steps", default=f"{ATTACK_WARM_STEPS},{STEERING_WARM_STEPS}",
                   help="comma-separated warm starts, one policy each")
    p.add_argument("--seed", type=int, default=0, help="which positions fit the tolerance and which judge it")
    p.add_argument("--run-spec", type=Path, default=ROOT / "examples/run-attacks.toml")
    add_record_option(p)
    args = p.parse_args()
    try:
        warm = [int(w) for w in args.warm_steps.split(",")]
    except ValueError:
        p.error(f"--warm-steps must be comma-separated integers, got {args.warm_steps!r}")
    if args.files < 2 or any(w < 0 for w in warm):
        p.error("--files must be >= 2 and every --warm-steps >= 0")
    torch.manual_seed(0)
    results = []
    for w in warm:
        r = measure(args.run_spec, w, args.files, args.seed)
        d, a = r["deviation"], r["absolute"]
        print(f"policy of {w} warm steps: {r['positions']} positions, deviation median {d['median']} p99 {d['p99']} "
              f"max {d['max']}")
        print(f"  {'absolute':12s} tolerance {a['median_tolerance']:.4f}  false positives {a['false_positives']}  "
              f"second token admitted {a['second_token_admitted']:.4f}")
        for name, j in r["relative"].items():
            print(f"  {name:12s} tolerance {j['median_tolerance']:.4f} (median)  false positives {j['false_positives']}  "
                  f"second token admitted {j['second_token_admitted']:.4f}  corr(deviation, scale) {j['correlation']:+.2f}")
        results.append(r)
    emit({"policies": results}, args, "noise_scale")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    sys.exit(main())
