"""Every attack on the checks, at the profiles pools use: `python -m bench.attacks [--quick]`.

Two profiles of one pool (examples/run-attacks.toml, the tiny char-level policy warm-started on its task, saved as
a bf16-exact Hugging Face folder):
- fp32: float32 workers, float32 validator, the run spec's [verification] as shipped (tolerance 1e-3);
- bf16: bf16 workers, float32 validator, [verification] from `validator calibrate --json` on that folder (its
  dtypes float32 and bfloat16, batch sizes 1 and 8): the tolerance, TOPLOC limits and margin null it writes.

The attacks are adversaries.samplers.attacks (adversaries/workers.py's file attacks among them) and the hostile
bytes of adversaries/files.py; this module runs and reports them.
Each attack makes files of the pool's shape for fresh nonces and each file goes through the validator's own checks
after the file's identity (validator.checks.check_contents: vocabulary, assignment, rewards, then every completion
at q = 1: structure, termination, sampling replay, logprobs, TOPLOC, the margin test); hostile bytes go through
the decoder first. Attackers that need a model compute in the profile's worker dtype; "forged" attackers recompute
their proofs and logprobs with one prefill of the real checkpoint (in that dtype), so that only the replay and the
margin test can see their sampler. Steering searches among the tokens the tolerance admits under the validator's
own float32 logits for a higher reward, on a policy warm-started until it solves part of the task
(`--steering-warm-steps`, its own bf16 calibration); its reward gain per completion, the files challenged and its
per-worker accumulated test (validator.worker_margins: after how many files, how often) are reported. An honest campaign checks files across worker dtypes,
batch sizes and lengths at both profiles (and keeps one per-worker book per profile).

Printed: per attack and profile the files detected with a Wilson 95 % interval and the challenge reasons; honest
false positives with their rate's upper Wilson bound and the per-file rate the profile states. Last line: one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from adversaries.files import HOSTILE_FILES
from adversaries.models import CHANGES
from adversaries.samplers import DTYPES, WORKER, Checkpoint, Profile, attacks, steer
from bench.cleanup import exit_on_signals
from bench.detection import wilson
from bench.report import add_record_option, emit
from protocol.rollouts import RolloutBatch, RolloutFileError, RolloutLimits, decode_rollouts, encode_rollouts
from protocol.runspec import RunSpec, VerificationSpec, load_run_spec
from protocol.spotcheck import MAX_BPS
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from validator.checks import PROOF_CHUNK, check_contents, verify_config_of
from validator.outcome import CheckOutcome, Submission
from validator.worker_margins import WorkerMargins

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "examples/run-attacks.toml"
Z95 = 1.959964
ATTACK_WARM_STEPS = 25
"""The attacked policy: trainer init's default warm start (held-out accuracy ~0.07)."""
STEERING_WARM_STEPS = 100
"""The steering worker's policy: warm-started until it solves part of the task, so that a search among near-ties
has rewards to find (at 25 steps it almost never solves a sort and steering gained nothing)."""


class Lab(Checkpoint):
    """One pool's checkpoint and the parties around it, without a chain: honest workers per dtype, attackers,
    and the validator's float32 reference backend."""

    def __init__(self, folder: Path, spec: RunSpec):
        super().__init__(folder, spec)
        self.validator = self.backend(self.model, torch.float32)

    def honest_contexts(self, files: int) -> list[tuple[list[int], list[int]]]:
        """(prompt, completion) of every completion of `files` honest float32 files of the pool (nonces 900,000 on)."""
        return [(s.prompt_ids, s.completion_ids) for n in range(files)
                for s in self.honest(self.spec, 900_000 + n, "float32").samples]

    def judge(self, spec: RunSpec, batch: RolloutBatch) -> CheckOutcome:
        """The validator's checks after identity, every completion checked (q = 1)."""
        h = batch.header
        sub = Submission(self.binding(h.nonce).work_id, h.pool_id, h.worker, h.policy_step, len(batch.samples),
                         h.nonce, b"\x00" * 32)
        return check_contents(spec, self.task, verify_config_of(spec), MAX_BPS, sub, batch, self.validator,
                              self.tokenizer)

    def judge_bytes(self, spec: RunSpec, data: bytes) -> CheckOutcome:
        """`judge` after the decoder (RolloutChecker.check's first step), for files that attack the reader."""
        try:
            batch = decode_rollouts(data, RolloutLimits.for_spec(spec, PROOF_CHUNK))
        except RolloutFileError as exc:
            return CheckOutcome(False, message=str(exc)[:200], reason=None)
        return self.judge(spec, batch)


# ---- building the pool ---------------------------------------------------------------------------------------


def build_checkpoint(spec: RunSpec, folder: Path, warm_steps: int) -> Path:
    """The tiny policy warm-started on the task, its weights rounded to bf16 (a bf16 checkpoint read in float32)."""
    model, tokenizer = init_policy(spec, ModelSpec(hidden=64, layers=2, heads=4), warm_steps=warm_steps, warm_lr=1e-3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def calibrated_profile(folder: Path, spec_path: Path, prompts: int) -> Profile:
    """The bf16 profile: `validator calibrate` as a pool owner runs it (its JSON output)."""
    command = [sys.executable, "-m", "validator.cli", "calibrate", "--checkpoint", str(folder), "--run-spec",
               str(spec_path), "--dtypes", "float32,bfloat16", "--batch-sizes", "1,8", "--prompts", str(prompts),
               "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"validator calibrate failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Profile("bf16", "bfloat16", VerificationSpec(**result["verification"]), result["stated"])


# ---- how far a sampler's logits are from the checkpoint's ----------------------------------------------------


def logit_errors(lab: Lab, files: int = 4) -> dict[str, float]:
    """RMS difference of each sampler's bf16 logits from the validator's float32 ones on honest completions: the
    honest bf16 worker's (the noise the pool must accept) beside those of the model-changing attacks."""
    contexts = lab.honest_contexts(files)
    reference = [p.logits.float() for p in lab.validator.prefill_batch(contexts)]
    models = {"honest bf16 worker": lab.fresh_model()}
    models.update({name: change(lab.fresh_model()) for name, change in CHANGES.items()})
    out = {}
    for name, model in models.items():
        logits = [p.logits.float() for p in lab.backend(model, torch.bfloat16).prefill_batch(contexts)]
        diff = torch.cat([(a - r).flatten() for a, r in zip(logits, reference, strict=True)])
        out[name] = round(float(diff.pow(2).mean().sqrt()), 6)
    return out


# ---- running ---------------------------------------------------------------------------------------------------


def rate(k: int, n: int) -> dict:
    low, high = wilson(k, n, Z95)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "ci95": [round(low, 4), round(high, 4)]}


def run_attacks(lab: Lab, profile: Profile, files: int, names: list[str] | None, console: Console,
                nonce_base: int, workdir: Path | None = None) -> list[dict]:
    """Each attack's files through the validator's checks; the files a check accepts also go into a per-worker
    margin book, one per attack (one attacker submitting them all): after how many files the worker test
    (validator.worker_margins) challenges it, if it does, and its log e-value at the end."""
    spec = profile.spec(lab.spec)
    null = spec.verification.margin_null()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="bench-attacks-books-"))
    top_p_spec = None
    try:
        top_p_spec = spec.model_validate({**spec.model_dump(), "sampling": {**spec.sampling.model_dump(), "top_p": 0.9}})
    except ValueError as exc:
        why = next(line for line in str(exc).splitlines() if "top_p" in line)
        console.print(f"\\[{profile.name}] out-of-nucleus: the pool refuses top_p 0.9: {why.strip()[:300]}")
    rows = []
    table = attacks(top_p_spec)
    for name, build in table.items():
        if names is not None and name not in names:
            continue
        detected, reasons = 0, Counter()
        judged_spec = top_p_spec if name.startswith("out-of-nucleus") else spec
        book = WorkerMargins(workdir / f"{profile.name}-{len(rows)}.json")
        worker_at, log_e = None, None
        for f in range(files):
            outcome = lab.judge(judged_spec, build(lab, profile, spec, nonce_base + f))
            detected += not outcome.ok
            reasons[outcome.reason.name if outcome.reason else ("decoder" if not outcome.ok else "accepted")] += 1
            if outcome.ok and outcome.margins:
                evidence = book.judge(WORKER, f"0x{nonce_base + f:064x}", outcome.margins["prompt_tokens"],
                                      outcome.margins["score"], null, spec.verification.worker_false_positive_rate)
                log_e = round(book.log_e_value(WORKER, null), 2)
                worker_at = worker_at or (f + 1 if evidence is not None else None)
        rows.append({"attack": name, **rate(detected, files), "reasons": dict(reasons),
                     "worker_challenged_after_files": worker_at, "worker_log_e_end": log_e})
        console.print(f"\\[{profile.name}] {name}: {detected}/{files} files detected ({dict(reasons)})"
                      + ("" if log_e is None else f"; accepted files' worker log e {log_e}"
                         + (f", challenged after {worker_at} files" if worker_at else "")))
    if names is None:
        honest = encode_rollouts(lab.honest(spec, nonce_base, profile.worker_dtype))
        for name, hostile in HOSTILE_FILES.items():
            outcome = lab.judge_bytes(spec, hostile(honest))
            rows.append({"attack": f"hostile bytes: {name}", **rate(int(not outcome.ok), 1),
                         "reasons": {outcome.reason.name if outcome.reason else "decoder": 1}})
    return rows


def run_steering(lab: Lab, profile: Profile, files: int, budget: int, nonce_base: int, workdir: Path) -> dict:
    spec = profile.spec(lab.spec)
    book = WorkerMargins(workdir / f"steering-{profile.name}.json")
    null = spec.verification.margin_null()
    detected = worker_challenged_at = worker_challenges = 0
    gains, bases, log_e = [], [], 0.0
    for f in range(files):
        batch, gain, base = steer(lab, profile, spec, nonce_base + f, budget)
        gains.append(gain)
        bases.append(base)
        outcome = lab.judge(spec, batch)
        if not outcome.ok:
            detected += 1
            continue
        evidence = book.judge(WORKER, f"0x{nonce_base + f:064x}", outcome.margins["prompt_tokens"],
                              outcome.margins["score"], null, spec.verification.worker_false_positive_rate)
        log_e = book.log_e_value(WORKER, null)
        worker_challenges += evidence is not None
        if evidence is not None and not worker_challenged_at:
            worker_challenged_at = f + 1
    return {"files": files, "logit_tolerance": profile.verification.logit_tolerance,
            "budget_per_completion": budget, "mean_reward_gain_per_completion": round(
        sum(gains) / len(gains), 4), "honest_mean_reward_per_completion": round(sum(bases) / len(bases), 4),
        **{"file_detection": rate(detected, files)},
        "worker_challenged_after_files": worker_challenged_at or None, "worker_challenges": worker_challenges,
        "worker_log_e_end": round(log_e, 2),
        "worker_log_e_threshold": round(math.log(1 / spec.verification.worker_false_positive_rate), 2)}


@dataclass(frozen=True)
class HonestCell:
    dtype: str
    batch_size: int | None
    prompts: int
    max_tokens: int


def honest_cells(quick: bool) -> list[HonestCell]:
    lengths = (4, 16) if quick else (1, 4, 16, 32)
    return [HonestCell(d, b, p, t) for d in DTYPES for b in (1, None) for p in (1, 2) for t in lengths]


def run_honest(lab: Lab, profiles: list[Profile], files: int, console: Console, workdir: Path) -> dict:
    """`files` honest files over the cells (dtype x batch size x prompts x length), each judged by every profile
    whose workers may use its dtype (fp32: float32 only); one per-worker book per profile."""
    cells = honest_cells(files < 1000)
    out = {p.name: {"files": 0, "false_positives": 0, "completions": 0, "tokens": 0, "reasons": Counter(),
                    "worker_challenged": False} for p in profiles}
    books = {p.name: WorkerMargins(workdir / f"honest-{p.name}.json") for p in profiles}
    start = time.perf_counter()
    for f in range(files):
        cell = cells[f % len(cells)]
        spec = lab.spec.model_copy(update={"prompts_per_submission": cell.prompts, "sampling": lab.spec.sampling.model_copy(
            update={"max_tokens": cell.max_tokens})})
        batch = lab.honest(spec, 1_000_000 + f, cell.dtype, cell.batch_size)
        for profile in profiles:
            if profile.worker_dtype == "float32" and cell.dtype != "float32":
                continue
            judged = profile.spec(spec)
            outcome = lab.judge(judged, batch)
            o = out[profile.name]
            o["files"] += 1
            o["completions"] += len(batch.samples)
            o["tokens"] += outcome.tokens
            if not outcome.ok:
                o["false_positives"] += 1
                o["reasons"][outcome.reason.name] += 1
                console.print(f"\\[{profile.name}] honest FALSE POSITIVE {cell}: {outcome.message[:200]}")
            elif outcome.margins and books[profile.name].judge(
                    WORKER, f"0x{f:064x}", outcome.margins["prompt_tokens"], outcome.margins["score"],
                    judged.verification.margin_null(), judged.verification.worker_false_positive_rate) is not None:
                o["worker_challenged"] = True
        if (f + 1) % 500 == 0:
            console.print(f"honest: {f + 1}/{files} files, {time.perf_counter() - start:.0f} s; false positives "
                          f"{ {name: o['false_positives'] for name, o in out.items()} }")
    result = {}
    for p in profiles:
        o = out[p.name]
        low, high = wilson(o["false_positives"], o["files"], Z95)
        log_e = books[p.name].log_e_value(WORKER, p.verification.margin_null())
        result[p.name] = {**{k: v for k, v in o.items() if k != "reasons"}, "reasons": dict(o["reasons"]),
                          "fp_rate": o["false_positives"] / max(o["files"], 1), "fp_rate_upper95": round(high, 6),
                          "worker_log_e_end": round(log_e, 2),
                          "stated_per_file_rate": p.verification.false_positive_rate}
    return result


def run(spec_path: Path, attack_files: int, honest_files: int, steering_files: int, budget: int,
        calibration_prompts: int, names: list[str] | None, console: Console,
        steering_warm_steps: int = ATTACK_WARM_STEPS) -> dict:
    torch.set_num_threads(1)
    spec = load_run_spec(spec_path)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-attacks-") as tmp:
        workdir = Path(tmp)
        folder = build_checkpoint(spec, workdir / "checkpoint", warm_steps=ATTACK_WARM_STEPS)
        console.print(f"calibrating the bf16 profile (validator calibrate --prompts {calibration_prompts})…")
        bf16 = calibrated_profile(folder, spec_path, calibration_prompts)
        fp32 = Profile("fp32", "float32", spec.verification, {"false_positive_rate": spec.verification.false_positive_rate})
        lab = Lab(folder, spec)
        profiles = [fp32, bf16]
        result: dict = {"file": (f"{spec.prompts_per_submission} prompts x {spec.sampling.group_size} completions x "
                                 f"<= {spec.sampling.max_tokens} tokens (examples/run-attacks.toml), every completion "
                                 "checked (q = 1)"),
                        "profiles": {p.name: {"worker_dtype": p.worker_dtype,
                                              "logit_tolerance": p.verification.logit_tolerance,
                                              "margin_tokens": p.verification.margin_tokens,
                                              "stated": p.stated} for p in profiles},
                        "attacks": {}, "steering": {}}
        result["logit_error_rms"] = logit_errors(lab)
        console.print(f"logit error (rms, bf16 against the float32 reference): {result['logit_error_rms']}")
        for i, profile in enumerate(profiles):
            result["attacks"][profile.name] = run_attacks(lab, profile, attack_files, names, console, 10_000 * (i + 1),
                                                          workdir)
        steer_lab, steer_profiles = lab, profiles
        if steering_warm_steps != ATTACK_WARM_STEPS:  # a policy that solves part of the task: room to steer
            steer_folder = build_checkpoint(spec, workdir / "steering-checkpoint", warm_steps=steering_warm_steps)
            console.print(f"steering policy ({steering_warm_steps} warm steps): calibrating its bf16 profile…")
            steer_lab = Lab(steer_folder, spec)
            steer_profiles = [fp32, calibrated_profile(steer_folder, spec_path, calibration_prompts)]
        result["steering_warm_steps"] = steering_warm_steps
        for i, profile in enumerate(steer_profiles):
            result["steering"][profile.name] = run_steering(steer_lab, profile, steering_files, budget,
                                                            50_000 + 1000 * i, workdir)
            console.print(f"\\[{profile.name}] steering: {result['steering'][profile.name]}")
        result["honest"] = run_honest(lab, profiles, honest_files, console, workdir)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def print_tables(result: dict, console: Console) -> None:
    for name, rows in result["attacks"].items():
        p = result["profiles"][name]
        table = Table(title=f"{name} profile: {p['worker_dtype']} workers, tolerance {p['logit_tolerance']:.4g}; "
                            f"a file = {result['file']}")
        for col in ("attack", "detected", "rate", "Wilson 95 %", "reasons", "worker test on accepted files"):
            table.add_column(col)
        for r in rows:
            worker = "" if r.get("worker_log_e_end") is None else (
                f"log e {r['worker_log_e_end']}" + (f", caught after {r['worker_challenged_after_files']} files"
                                                    if r.get("worker_challenged_after_files") else ""))
            table.add_row(r["attack"], f"{r['k']}/{r['n']}", f"{r['rate']:.3f}", f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]",
                          ", ".join(f"{k}:{v}" for k, v in r["reasons"].items()), worker)
        console.print(table)
        s = result["steering"][name]
        console.print(f"steering ({name}, policy of {result['steering_warm_steps']} warm steps, honest reward "
                      f"{s['honest_mean_reward_per_completion']} per completion): reward gain "
                      f"{s['mean_reward_gain_per_completion']} per completion, files "
                      f"detected {s['file_detection']['k']}/{s['files']}, worker challenged after "
                      f"{s['worker_challenged_after_files']} files, {s['worker_challenges']} times in all (log e at "
                      f"the end {s['worker_log_e_end']} of "
                      f"{s['worker_log_e_threshold']})")
    errors = result["logit_error_rms"]
    honest = errors["honest bf16 worker"]
    console.print("logit error against the float32 reference (rms): " + ", ".join(
        f"{name} {e:.4g} ({e / honest:.2f}x the honest bf16 worker's)" for name, e in errors.items()))
    for name, h in result["honest"].items():
        console.print(f"honest ({name}): {h['false_positives']} false positives in {h['files']} files "
                      f"({h['completions']} completions, {h['tokens']} tokens); rate {h['fp_rate']:.2g}, upper 95 % "
                      f"{h['fp_rate_upper95']:.2g}; stated per-file rate {h['stated_per_file_rate']:g}; worker log e "
                      f"{h['worker_log_e_end']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="bounded form: 5 files per attack, 200 honest files, 3 steering files")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML (default examples/run-attacks.toml)")
    p.add_argument("--attack-files", type=int, help="files per attack and profile (default 30; --quick 5)")
    p.add_argument("--honest-files", type=int, help="honest files (default 5000; --quick 200)")
    p.add_argument("--steering-files", type=int, help="files of the steering worker (default 20; --quick 3)")
    p.add_argument("--budget", type=int, default=16, help="steering rollouts per completion")
    p.add_argument("--steering-warm-steps", type=int, default=STEERING_WARM_STEPS,
                   help="warm-start steps of the policy the steering worker attacks (default %(default)s: one that "
                        "solves part of the task; the attacks' policy of 25 steps leaves nothing to steer toward)")
    p.add_argument("--calibration-prompts", type=int, help="validator calibrate --prompts (default 512; --quick 128)")
    add_record_option(p)
    args = p.parse_args()
    console = Console()
    try:
        result = run(args.spec, args.attack_files or (5 if args.quick else 30),
                     args.honest_files or (200 if args.quick else 5000), args.steering_files or (3 if args.quick else 20),
                     args.budget, args.calibration_prompts or (128 if args.quick else 512), None, console,
                     args.steering_warm_steps)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print_tables(result, console)
    emit(result, args, "attacks")


if __name__ == "__main__":
    exit_on_signals()
    main()
