"""How often spot checks catch a cheater: `python -m bench.detection [--quick] [--spec TOML]`.

Cheaters fabricate 1, 4 or all completions of each file (adversaries.workers.fabricate_completions:
tokens the policy did not sample, everything else honest, rewards rescored — only the prefill checks can
tell); honest files are checked alongside. Each trial checks one file, with the positions it fabricates
drawn by the cheater at random, under randomness the cheater cannot know (a fresh block hash: trial i
uses keccak("block" ‖ i) as blockhash(B + 1)), through the validator's own completion checks and draw
(validator.checks.check_completions → protocol.spotcheck) on a real (tiny) policy; no chain.

Predicted detection: hypergeometric, 1 − C(n − f, m) / C(n, m) with m = ceil(q·n). Measured: the share of
trials the checker challenged, with a Wilson interval at a Bonferroni-corrected level (family-wise 95 %
over every (q, fabricated) cell). Last line: one JSON object with `rates`, `all_within_ci` and
`false_positives` (challenges of honest files: must be 0).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from pathlib import Path

import torch
from eth_utils import keccak
from rich.console import Console
from rich.table import Table

from adversaries.workers import fabricate_completions
from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from inference.policy import stop_token_ids
from inference.torch_backend import TorchBackend
from protocol.digest import Digest
from protocol.runspec import load_run_spec
from protocol.spotcheck import MAX_BPS, detection_probability, spot_check_count
from protocol.submission import SubmissionBinding
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from validator.checks import check_completions, verify_config_of
from validator.outcome import Submission
from worker.policy import Policy
from worker.produce import make_batch

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "examples/run-spot.toml"
FAMILY_CONFIDENCE = 0.95


def wilson(successes: int, trials: int, z: float) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def run(spec_path: Path, qs: list[float], fabricated: list[int | None], trials: int, files: int, max_tokens: int,
        console: Console) -> dict:
    torch.set_num_threads(1)
    spec = load_run_spec(spec_path)
    spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update={"max_tokens": max_tokens})})
    model, tokenizer = init_policy(spec, ModelSpec(hidden=64, layers=2, heads=4), warm_steps=0, warm_lr=0.0)
    policy = Policy(0, Digest(b"\x11" * 32), model, tokenizer)
    backend = TorchBackend(model, eos_token_id=stop_token_ids(model, tokenizer), pad_token_id=tokenizer.pad_token_id)
    config = verify_config_of(spec)
    worker = "0x" + "ab" * 20
    bindings = [SubmissionBinding(chain_id=31337, pool_contract="0x" + "cd" * 20, pool_id=1, worker=worker, step=0,
                                  nonce=nonce) for nonce in range(files)]
    console.print(f"generating {files} honest files of {spec.prompts_per_submission * spec.sampling.group_size} "
                  f"completions × ≤ {max_tokens} tokens…")
    honest = [make_batch(policy, spec, b) for b in bindings]
    n = len(honest[0].samples)
    cells = [(q, f) for q in qs for f in fabricated]
    z = statistics.NormalDist().inv_cdf(1 - (1 - FAMILY_CONFIDENCE) / (2 * sum(1 for _, f in cells if f is not None)))
    rng = random.Random(14)
    trial = 0

    def check(batch, binding: SubmissionBinding, bps: int) -> bool:
        """Whether the validator's completion checks challenge `batch` under a fresh block hash."""
        nonlocal trial
        trial += 1
        sub = Submission(binding.work_id, binding.pool_id, binding.worker, binding.step, n, binding.nonce,
                         b"\x00" * 32, spot_block=trial, spot_block_hash=keccak(b"block" + trial.to_bytes(8, "big")))
        return not check_completions(spec, config, bps, sub, batch, backend).ok

    rates = []
    start = time.perf_counter()
    for q, f in cells:
        bps = max(1, round(q * MAX_BPS))
        count = n if f is None else f
        m = spot_check_count(n, bps)
        caught = 0
        for t in range(trials):
            k = t % files
            positions = rng.sample(range(n), count)
            caught += check(fabricate_completions(policy, spec, honest[k], positions), bindings[k], bps)
        low, high = wilson(caught, trials, z)
        predicted = detection_probability(n, m, count)
        rates.append({"q": q, "fabricated": count, "m": m, "n": n, "predicted": round(predicted, 4),
                      "measured": round(caught / trials, 4), "ci_low": round(low, 4), "ci_high": round(high, 4),
                      "trials": trials})
        console.print(f"q={q:g} (m={m} of {n}), {count} fabricated: caught {caught}/{trials}, predicted "
                      f"{predicted:.4f}, CI [{low:.4f}, {high:.4f}]")
    false_positives = honest_trials = 0
    for q in qs:
        bps = max(1, round(q * MAX_BPS))
        for t in range(trials):
            k = t % files
            false_positives += check(honest[k], bindings[k], bps)
            honest_trials += 1
    return {
        "n": n, "max_tokens": max_tokens, "trials_per_cell": trials,
        "confidence_per_cell": round(1 - 2 * (1 - statistics.NormalDist().cdf(z)), 5),
        "family_confidence": FAMILY_CONFIDENCE, "rates": rates,
        "all_within_ci": all(r["ci_low"] <= r["predicted"] <= r["ci_high"] for r in rates),
        "false_positives": false_positives, "honest_trials": honest_trials,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="300 trials per cell (the CI-sized run)")
    p.add_argument("--trials", type=int, help="files checked per (q, fabricated) cell (default 300, --quick; 2000)")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML: file shape (default run-spot)")
    p.add_argument("--q", type=float, nargs="+", default=[0.05, 0.1, 0.25], help="spot-check fractions")
    p.add_argument("--files", type=int, default=4, help="distinct honest files the cheaters start from")
    p.add_argument("--max-tokens", type=int, default=16, help="completion length (detection does not depend on it)")
    add_record_option(p)
    args = p.parse_args()
    if any(not 0 < q <= 1 for q in args.q):
        p.error("--q values must be in (0, 1]")
    trials = args.trials or (300 if args.quick else 2000)
    console = Console()
    result = run(args.spec, args.q, [1, 4, None], trials, args.files, args.max_tokens, console)
    table = Table(title=f"spot-check detection (n = {result['n']}, {trials} trials per cell)")
    for col in ("q", "fabricated", "m", "predicted", "measured", "CI"):
        table.add_column(col, justify="right")
    for r in result["rates"]:
        table.add_row(f"{r['q']:g}", str(r["fabricated"]), str(r["m"]), f"{r['predicted']:.4f}",
                      f"{r['measured']:.4f}", f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]")
    console.print(table)
    console.print(f"all within CI: {result['all_within_ci']}; false positives: {result['false_positives']} of "
                  f"{result['honest_trials']} honest files")
    emit(result, args, "detection")


if __name__ == "__main__":
    exit_on_signals()
    main()
