"""Whether a float pool's stated error rates hold: `python -m bench.stated_rates [--quick]`.

The pool of bench.attacks (examples/run-attacks.toml: the sort task, 16 completions × ≤ 16 tokens a prompt, its tiny
char-level policy saved bf16-exact) at two policy ages, 25 and 100 warm steps, each calibrated as a pool owner does
it (`validator calibrate --json --dtypes float32,bfloat16 --batch-sizes 1,8`, bench.attacks.calibrated_profile): the
[verification] table it writes and the rates it states (`stated`: the per-file `false_positive_rate`, the per-worker
`worker_false_positive_rate`).

Honest campaigns, one per profile (policy age × worker dtype × prompts a file, 1 or 4): distinct files of fresh
nonces from an honest worker of that dtype whose engine generates `--batch-sizes` completions at a time, across the
files it has to make (an engine batching several submissions; the sizes take turns by blocks of 64 files), each file
checked once, every completion checked (q = 1), by the validator's own completion checks
(validator.checks.check_completions on the reference backend, reference_backend, with verify_config_of's rules):
replay, termination, TOPLOC and its chunk count, the per-file margin test. Per profile: `honest_files`,
`honest_false_positives`, `upper95_file_rate` (one-sided 95 % Clopper–Pearson bound on the honest per-file rate)
and `stated_file_rate`. The per-worker rate: `honest_workers` simulated honest workers, each submitting
`files_per_worker` files drawn with replacement from the profile's accepted honest files, each book run through the
validator's per-worker e-process (the daemon's `_accumulated`: validator.worker_margins.OpenTotals over
proofs.margins' factors, challenged at log(1 / worker_false_positive_rate)); `honest_workers_challenged` counts the
workers ever challenged, against `stated_worker_rate`.

Attacks (issue 45's findings 1–4), on the same pools and checks:
1. steering among near-ties (adversaries.samplers.steer) on the 100-step policy: files challenged by the file test
   (a court pool, where no validator keeps the worker's record), and in a permissioned pool by the worker test too,
   with one address and with a fresh address per file; its reward gain per completion;
2. the 1.9ε logit bias on the answer's tokens (adversaries.samplers.logit_biased) on the 25-step policy, in files of
   `--bias-prompts` prompts spot-checked at `--bias-bps` with the run spec's floor of checked tokens set to the floor
   `RunSpec.tokens_for_power` states for 99 % of biased files (docs/protocol.md R8.6);
3. int8 weights and a 1 % change of layer 0 with their own proofs (adversaries.samplers' changed models) at
   max_tokens 8 and 16, bf16;
4. seed re-roll by the pin block's proposer: the same nonce's honest file under 1, 2 or 4 block hashes, the one of
   highest reward submitted; its reward gain per completion, and whether the checks see it.

Printed: one table of the profiles and one line per attack; last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from eth_utils import keccak
from rich.console import Console
from rich.table import Table

from adversaries.samplers import Profile, attacks, logit_biased, steer
from bench.attacks import DEFAULT_SPEC, Lab, build_checkpoint, calibrated_profile, rate
from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from inference.backend import InferenceBackend
from protocol.digest import Digest
from protocol.rollouts import RolloutBatch
from protocol.runspec import RunSpec, load_run_spec
from protocol.spotcheck import MAX_BPS
from protocol.submission import SubmissionBinding
from validator.checks import check_completions, reference_backend, verify_config_of
from validator.outcome import CheckOutcome, Submission
from validator.worker_margins import OpenTotals
from worker.produce import make_batch

AGES = (25, 100)
DTYPES = ("bfloat16", "float32")
PROMPTS = (1, 4)
BLOCK = 64
"""Files generated together; the engine's batch size changes from one block to the next."""
CONFIDENCE = 0.95


# ---- one pool at one policy age ---------------------------------------------------------------------------------


@dataclass
class Pool:
    """A policy age's checkpoint, its calibrated profile and the validator's reference backend."""

    steps: int
    lab: Lab
    profile: Profile
    validator: InferenceBackend

    def spec(self, prompts: int | None = None, max_tokens: int | None = None) -> RunSpec:
        """The run spec under the calibrated [verification], with other file shapes where asked."""
        spec = self.profile.spec(self.lab.spec)
        update: dict = {}
        if prompts is not None:
            update["prompts_per_submission"] = prompts
        if max_tokens is not None:
            update["sampling"] = spec.sampling.model_copy(update={"max_tokens": max_tokens})
        return spec.model_copy(update=update)

    def judge(self, spec: RunSpec, batch: RolloutBatch, binding: SubmissionBinding, bps: int = MAX_BPS) -> CheckOutcome:
        """The validator's completion checks of one file; below q = 1 the spot check is drawn from a block hash the
        worker cannot know (keccak of the work id)."""
        work_id = binding.work_id
        sub = Submission(work_id, binding.pool_id, binding.worker, binding.step, len(batch.samples), binding.nonce,
                         b"\x00" * 32, spot_block=1, spot_block_hash=keccak(b"spot block" + work_id))
        return check_completions(spec, verify_config_of(spec), bps, sub, batch, self.validator)


def build_pool(spec: RunSpec, spec_path: Path, workdir: Path, steps: int, calibration_prompts: int) -> Pool:
    folder = build_checkpoint(spec, workdir / f"policy-{steps}", warm_steps=steps)
    profile = calibrated_profile(folder, spec_path, calibration_prompts)
    lab = Lab(folder, spec)
    return Pool(steps, lab, profile, reference_backend(profile.spec(spec), lab.model, lab.tokenizer))


# ---- honest files, generated in an engine's batches ------------------------------------------------------------


class _Asked(Exception):
    pass


class _Recorder:
    """A backend that only notes the rows make_batch asks it for."""

    def __init__(self) -> None:
        self.rows: list[tuple[tuple[int, ...], int]] = []

    def generate(self, prompts, params, seeds):
        self.rows += [(tuple(p), s) for p, s in zip(prompts, seeds, strict=True)]
        raise _Asked


class _Served:
    """A backend that hands back completions generated beforehand, by (prompt, seed)."""

    def __init__(self, done: dict) -> None:
        self.done = done

    def generate(self, prompts, params, seeds):
        return [self.done[(tuple(p), s)] for p, s in zip(prompts, seeds, strict=True)]


def honest_files(lab: Lab, spec: RunSpec, bindings: list[SubmissionBinding], dtype: str,
                 rows: int) -> list[RolloutBatch]:
    """The honest files of `bindings` from the worker of `dtype`, its engine generating `rows` completions at a time
    across the files (each file made by worker.produce.make_batch, as a worker makes it)."""
    policy, backend = lab.worker(dtype)
    recorder = _Recorder()
    for binding in bindings:
        try:
            make_batch(policy, spec, binding, backend=recorder)
        except _Asked:
            pass
    done = {}
    for begin in range(0, len(recorder.rows), rows):
        part = recorder.rows[begin : begin + rows]
        done.update(zip(part, backend.generate([list(p) for p, _ in part], spec.sampling, [s for _, s in part]),
                        strict=True))
    served = _Served(done)
    return [make_batch(policy, spec, binding, backend=served) for binding in bindings]


# ---- rates -----------------------------------------------------------------------------------------------------


def _binomial_cdf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                                 + j * math.log(p) + (n - j) * math.log1p(-p)) for j in range(k + 1)))


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds at `confidence` each: (lower, upper) on a binomial rate from k of n."""
    if n == 0:
        return 0.0, 1.0
    alpha = 1 - confidence
    upper = 1.0
    if k < n:
        low, high = k / n, 1.0
        for _ in range(100):  # P(X ≤ k | u) = alpha
            mid = (low + high) / 2
            low, high = (mid, high) if _binomial_cdf(k, n, mid) > alpha else (low, mid)
        upper = high
    lower = 0.0
    if k > 0:
        low, high = 0.0, k / n
        for _ in range(100):  # P(X ≥ k | l) = alpha
            mid = (low + high) / 2
            low, high = (mid, high) if 1 - _binomial_cdf(k - 1, n, mid) < alpha else (low, mid)
        lower = low
    return lower, upper


def book_entry(null, prompt_tokens: list[int], score: float) -> list:
    """An accepted file as a worker's book holds it (validator.worker_margins): tokens, score, factors, prompts."""
    return [sum(prompt_tokens), score, null.worker_log_terms(score, prompt_tokens), list(prompt_tokens)]


def honest_books(null, accepted: list[list], workers: int, files: int, rate_: float, rng: random.Random) -> dict:
    """`workers` honest workers of `files` files each, drawn with replacement from `accepted` (book entries), each
    book through the validator's per-worker e-process: how many are ever challenged, and the largest log e-value."""
    threshold = math.log(1 / rate_)
    challenged, top = 0, -math.inf
    if not accepted:
        return {"honest_workers": 0, "honest_workers_challenged": 0, "files_per_worker": files, "max_log_e": None}
    for _ in range(workers):
        totals = OpenTotals()
        for _ in range(files):
            totals.add(accepted[rng.randrange(len(accepted))])
            log_e = totals.log_e_value(null)
            top = max(top, log_e)
            if log_e >= threshold:
                challenged += 1
                break
    return {"honest_workers": workers, "honest_workers_challenged": challenged, "files_per_worker": files,
            "max_log_e": round(top, 2)}


def campaign(pool: Pool, dtype: str, prompts: int, files: int, batch_sizes: list[int], workers: int,
             worker_files: int, nonce_base: int, console: Console) -> dict:
    """One profile's honest files through the checks, then its simulated honest books (module text)."""
    spec = pool.spec(prompts)
    v = spec.verification
    null = v.margin_null()
    accepted, reasons = [], Counter()
    false_positives = checked = 0
    started = time.perf_counter()
    for block, start in enumerate(range(0, files, BLOCK)):
        bindings = [pool.lab.binding(nonce_base + f) for f in range(start, min(files, start + BLOCK))]
        rows = batch_sizes[block % len(batch_sizes)]
        for binding, batch in zip(bindings, honest_files(pool.lab, spec, bindings, dtype, rows), strict=True):
            outcome = pool.judge(spec, batch, binding)
            checked += outcome.checked_tokens
            if not outcome.ok:
                false_positives += 1
                reasons[outcome.reason.name if outcome.reason else "none"] += 1
                console.print(f"  honest FALSE POSITIVE ({pool.steps} steps, {dtype}, {prompts} prompts, batch {rows}, "
                              f"nonce {binding.nonce}): {outcome.message[:160]}")
            elif outcome.margins:
                accepted.append(book_entry(null, outcome.margins["prompt_tokens"], outcome.margins["score"]))
    seconds = time.perf_counter() - started
    books = honest_books(null, accepted, workers, worker_files, v.worker_false_positive_rate,
                         random.Random(nonce_base))
    low, high = clopper_pearson(false_positives, files)
    w_low, w_high = clopper_pearson(books["honest_workers_challenged"], books["honest_workers"])
    stated_file = pool.profile.stated["false_positive_rate"]
    stated_worker = pool.profile.stated["worker_false_positive_rate"]
    return {"policy_warm_steps": pool.steps, "worker_dtype": dtype, "prompts_per_file": prompts,
            "honest_files": files, "honest_false_positives": false_positives, "reasons": dict(reasons),
            "upper95_file_rate": float(f"{high:.4g}"), "lower95_file_rate": float(f"{low:.4g}"),
            "stated_file_rate": stated_file, "file_rate_holds": low <= stated_file,
            **books, "upper95_worker_rate": float(f"{w_high:.4g}"), "lower95_worker_rate": float(f"{w_low:.4g}"),
            "stated_worker_rate": stated_worker, "worker_rate_holds": w_low <= stated_worker,
            "checked_tokens_per_file": round(checked / max(files, 1), 1), "seconds": round(seconds, 1)}


# ---- attacks (issue 45, findings 1–4) -------------------------------------------------------------------------


def steering(pool: Pool, files: int, budget: int, nonce_base: int) -> dict:
    """Finding 1: the budgeted steerer, judged by the file test alone (a court pool) and with the worker test of a
    permissioned pool, by one address or a fresh one each file."""
    spec = pool.spec()
    v = spec.verification
    null, threshold = v.margin_null(), math.log(1 / v.worker_false_positive_rate)
    by_file = one_address = fresh_address = 0
    first_worker_challenge = None
    gains, bases = [], []
    book = OpenTotals()
    for f in range(files):
        nonce = nonce_base + f
        batch, gain, base = steer(pool.lab, pool.profile, spec, nonce, budget)
        gains.append(gain)
        bases.append(base)
        outcome = pool.judge(spec, batch, pool.lab.binding(nonce))
        if not outcome.ok:
            by_file += 1
            continue
        entry = book_entry(null, outcome.margins["prompt_tokens"], outcome.margins["score"])
        alone = OpenTotals()
        alone.add(entry)
        fresh_address += alone.log_e_value(null) >= threshold
        book.add(entry)
        if book.log_e_value(null) >= threshold:
            one_address += 1
            first_worker_challenge = first_worker_challenge or f + 1
            book = OpenTotals()  # a challenge spends the book
    return {"policy_warm_steps": pool.steps, "budget_per_completion": budget,
            "reward_gain_per_completion": round(sum(gains) / files, 4),
            "honest_reward_per_completion": round(sum(bases) / files, 4),
            "court_pool": rate(by_file, files), "permissioned_one_address": rate(by_file + one_address, files),
            "permissioned_fresh_address_per_file": rate(by_file + fresh_address, files),
            "worker_test_first_challenge_after_files": first_worker_challenge}


def bias_at_floor(pool: Pool, files: int, prompts: int, bps: int, nonce_base: int) -> dict:
    """Finding 2: the 1.9ε answer bias in files spot-checked at `bps` with the floor of checked tokens the spec
    states for 99 % of biased files (RunSpec.tokens_for_power)."""
    base = pool.spec(prompts)
    floor = base.tokens_for_power(0.99, 1_000_000)  # None: no floor reaches it, and the files are checked whole
    spec = base.model_copy(update={"verification": base.verification.model_copy(
        update={"spot_check_bps": bps, "min_checked_tokens": floor or 2**32 - 1})})
    caught, checked, reasons = 0, 0, Counter()
    for f in range(files):
        nonce = nonce_base + f
        outcome = pool.judge(spec, logit_biased(pool.lab, pool.profile, spec, nonce), pool.lab.binding(nonce), bps)
        caught += not outcome.ok
        checked += outcome.checked_tokens
        reasons[outcome.reason.name if outcome.reason else "accepted"] += 1
    return {"policy_warm_steps": pool.steps, "prompts_per_file": prompts, "spot_check_bps": bps,
            "floor_checked_tokens": floor, "stated_power_at_floor": 0.99,
            "checked_tokens_per_file": round(checked / max(files, 1), 1), **rate(caught, files),
            "reasons": dict(reasons)}


OWN_PROOFS = ("int8 weights", "layer 0 x 1.01")


def own_proofs_short(pool: Pool, files: int, nonce_base: int) -> list[dict]:
    """Finding 3: models changed a little, shipping their own proofs, in short (8) and longer (16) completions."""
    table, rows = attacks(None), []
    for i, name in enumerate(OWN_PROOFS):
        for j, max_tokens in enumerate((8, 16)):
            spec = pool.spec(max_tokens=max_tokens)
            caught, reasons = 0, Counter()
            for f in range(files):
                nonce = nonce_base + 1000 * (2 * i + j) + f
                outcome = pool.judge(spec, table[name](pool.lab, pool.profile, spec, nonce), pool.lab.binding(nonce))
                caught += not outcome.ok
                reasons[outcome.reason.name if outcome.reason else "accepted"] += 1
            rows.append({"attack": f"{name}, own proofs", "max_tokens": max_tokens, "policy_warm_steps": pool.steps,
                         **rate(caught, files), "reasons": dict(reasons)})
    return rows


def seed_reroll(pool: Pool, trials: int, nonce_base: int, hashes: int = 4) -> dict:
    """Finding 4: a proposer who picks the pin block's hash among `hashes` re-rolls its own nonce's seeds and
    submits the honest file of highest reward; the checks see an honest file."""
    spec = pool.spec()
    means, caught = [], 0
    for t in range(trials):
        nonce = nonce_base + t
        bindings = [pool.lab.binding(nonce).model_copy(update={"seed_block_hash": Digest(keccak(
            b"proposer" + nonce.to_bytes(8, "big") + bytes([h])))}) for h in range(hashes)]
        files = honest_files(pool.lab, spec, bindings, pool.profile.worker_dtype, 256)
        rewards = [sum(s.reward for s in f.samples) / len(f.samples) for f in files]
        means.append(rewards)
        best = max(range(hashes), key=rewards.__getitem__)
        caught += not pool.judge(spec, files[best], bindings[best]).ok
    gains = {f"best_of_{k}": round(sum(max(r[:k]) - r[0] for r in means) / trials, 4)
             for k in (2, 4) if k <= hashes}
    return {"policy_warm_steps": pool.steps, "trials": trials,
            "honest_reward_per_completion": round(sum(r[0] for r in means) / trials, 4),
            "reward_gain_per_completion": gains, "checks": rate(caught, trials)}


# ---- running ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    ages: tuple[int, ...]
    files: int
    batch_sizes: list[int]
    workers: int
    worker_files: int
    calibration_prompts: int
    steering_files: int
    budget: int
    bias_files: int
    bias_prompts: int
    bias_bps: int
    attack_files: int
    reroll_trials: int


def run(spec_path: Path, plan: Plan, console: Console) -> dict:
    torch.set_num_threads(1)
    spec = load_run_spec(spec_path)
    started = time.perf_counter()
    result: dict = {"file": (f"{spec.sampling.group_size} completions x <= {spec.sampling.max_tokens} tokens a prompt "
                             "(examples/run-attacks.toml), every completion checked (q = 1)"),
                    "batch_sizes": plan.batch_sizes, "pools": {}, "profiles": [], "attacks": {}, "attack_seconds": {}}
    with tempfile.TemporaryDirectory(prefix="bench-stated-rates-") as tmp:
        pools = {}
        for steps in plan.ages:
            console.print(f"policy of {steps} warm steps: validator calibrate --prompts {plan.calibration_prompts}…")
            pool = pools[steps] = build_pool(spec, spec_path, Path(tmp), steps, plan.calibration_prompts)
            v = pool.profile.verification
            result["pools"][str(steps)] = {"logit_tolerance": v.logit_tolerance, "margin_tail": v.margin_tail,
                                           "margin_tokens": v.margin_tokens, "spread_shape": v.spread_shape,
                                           "miscalibration": v.miscalibration, "stated": pool.profile.stated}
        nonce = 1_000_000
        for steps in plan.ages:
            for dtype in DTYPES:
                for prompts in PROMPTS:
                    row = campaign(pools[steps], dtype, prompts, plan.files, plan.batch_sizes, plan.workers,
                                   plan.worker_files, nonce, console)
                    nonce += 1_000_000
                    result["profiles"].append(row)
                    console.print(f"{steps} steps, {dtype}, {prompts} prompt(s): {row['honest_false_positives']}/"
                                  f"{row['honest_files']} files challenged {row['reasons']}, "
                                  f"{row['honest_workers_challenged']}/{row['honest_workers']} workers "
                                  f"({row['seconds']} s)")
                    console.print(json.dumps(row), markup=False, highlight=False)
        young, old = pools[min(plan.ages)], pools[max(plan.ages)]
        runs = {"steering": lambda: steering(old, plan.steering_files, plan.budget, 50_000),
                "bias_at_floor": lambda: bias_at_floor(young, plan.bias_files, plan.bias_prompts, plan.bias_bps, 60_000),
                "own_proofs": lambda: own_proofs_short(young, plan.attack_files, 70_000),
                "seed_reroll": lambda: seed_reroll(old, plan.reroll_trials, 80_000)}
        for name, attack in runs.items():
            begun = time.perf_counter()
            result["attacks"][name] = attack()
            result["attack_seconds"][name] = round(time.perf_counter() - begun, 1)
            console.print(f"{name} ({result['attack_seconds'][name]} s): {json.dumps(result['attacks'][name])}",
                          markup=False, highlight=False)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def print_table(result: dict, console: Console) -> None:
    table = Table(title=f"honest files and workers against the stated rates (engine batch sizes "
                        f"{result['batch_sizes']}; {result['file']})")
    for col in ("steps", "dtype", "prompts", "files", "challenged", "upper 95 %", "stated", "workers", "challenged ",
                "worker upper 95 %", "stated "):
        table.add_column(col, justify="right")
    for r in result["profiles"]:
        table.add_row(str(r["policy_warm_steps"]), r["worker_dtype"], str(r["prompts_per_file"]), str(r["honest_files"]),
                      str(r["honest_false_positives"]), f"{r['upper95_file_rate']:.2g}", f"{r['stated_file_rate']:g}",
                      f"{r['honest_workers']} x {r['files_per_worker']}", str(r["honest_workers_challenged"]),
                      f"{r['upper95_worker_rate']:.2g}", f"{r['stated_worker_rate']:g}")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="CI-sized: 200 honest files a profile, books of 200 x 200, "
                                                        "a few files an attack")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML (default examples/run-attacks.toml)")
    p.add_argument("--ages", help="policy ages in warm steps, comma-separated (default 25,100)")
    p.add_argument("--files", type=int, help="honest files a profile (default 5000; --quick 200)")
    p.add_argument("--batch-sizes", help="the honest engines' batch sizes in completions, taking turns by blocks of "
                                         "64 files (default 64,256,1024; --quick 8,64,256)")
    p.add_argument("--workers", type=int, help="simulated honest workers a profile (default 1000; --quick 200)")
    p.add_argument("--worker-files", type=int, help="files a simulated worker submits (default 1000; --quick 200)")
    p.add_argument("--calibration-prompts", type=int, help="validator calibrate --prompts (default 512; --quick 128)")
    p.add_argument("--steering-files", type=int, help="files of the steering worker (default 6; --quick 1)")
    p.add_argument("--budget", type=int, default=16, help="steering rollouts a completion (default 16)")
    p.add_argument("--bias-files", type=int, help="files of the 1.9ε-biased worker (default 100; --quick 3)")
    p.add_argument("--bias-prompts", type=int, default=64, help="prompts a biased file (default 64)")
    p.add_argument("--bias-bps", type=int, default=500, help="spot-check fraction of the biased files' pool in basis "
                                                              "points (default 500)")
    p.add_argument("--attack-files", type=int, help="files of each own-proofs model and length (default 30; --quick 4)")
    p.add_argument("--reroll-trials", type=int, help="nonces the proposer re-rolls (default 100; --quick 10)")
    add_record_option(p)
    args = p.parse_args(argv)
    q = args.quick
    try:
        plan = Plan(
            ages=tuple(int(a) for a in (args.ages or ",".join(map(str, AGES))).split(",")),
            files=args.files or (200 if q else 5000),
            batch_sizes=[int(b) for b in (args.batch_sizes or ("8,64,256" if q else "64,256,1024")).split(",")],
            workers=args.workers or (200 if q else 1000), worker_files=args.worker_files or (200 if q else 1000),
            calibration_prompts=args.calibration_prompts or (128 if q else 512),
            steering_files=args.steering_files or (1 if q else 6), budget=args.budget,
            bias_files=args.bias_files or (3 if q else 100), bias_prompts=args.bias_prompts, bias_bps=args.bias_bps,
            attack_files=args.attack_files or (4 if q else 30), reroll_trials=args.reroll_trials or (10 if q else 100))
    except ValueError:
        p.error("--ages and --batch-sizes are comma-separated integers")
    counts = {"--ages": min(plan.ages), "--files": plan.files, "--batch-sizes": min(plan.batch_sizes),
              "--workers": plan.workers, "--worker-files": plan.worker_files, "--bias-prompts": plan.bias_prompts,
              "--calibration-prompts": plan.calibration_prompts, "--steering-files": plan.steering_files,
              "--budget": plan.budget, "--bias-files": plan.bias_files, "--attack-files": plan.attack_files,
              "--reroll-trials": plan.reroll_trials}
    for name, value in counts.items():
        if value < (0 if name == "--ages" else 1):
            p.error(f"{name} must be at least {0 if name == '--ages' else 1}, got {value}")
    if not 0 < plan.bias_bps <= MAX_BPS:
        p.error(f"--bias-bps must be in 1..{MAX_BPS}, got {plan.bias_bps}")
    console = Console(width=160)
    try:
        result = run(args.spec, plan, console)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print_table(result, console)
    emit(result, args, "stated_rates", argv)
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
