"""Do honest workers stay safe as training sharpens the policy? `python -m bench.policy_drift [--files N] [--quick]`.

A pool calibrates its tolerances at creation (`validator calibrate` on the base policy). Training sharpens the
policy and the honest bf16 noise grows with it (bench.noise_scale: the worst |bf16 − float32| logit per position
has a growing tail), so the creation rules, applied to a later policy, challenge honest workers. The remedy is
tolerances that follow the policy (docs/protocol.md): the pool owner recalibrates on a newer policy (`validator
calibrate --pool N --out F`), the trainer attaches the table to what it publishes (`trainer start
--policy-verification F`), and validators judge that policy's files by the looser of it and the run spec's
(`RunSpec.verification_for`, the code path the validator runs).

This measures both rule sets on bench.attacks' pool (examples/run-attacks.toml, the tiny policy warm-started for
`--early` steps as the pool's base and `--late` steps as a later policy; both profiles by `validator calibrate`):

- honest bf16 workers of the late policy (batch 1 and the whole file at once), N files, judged by the creation
  rules and by the recalibrated ones: false positives with their reasons and Wilson intervals, the per-worker
  e-process at the end, and how much of the margin null the accepted files use (the validator's drift signal,
  `validator.worker_margins.NullUse`: above 1, recalibrate);
- what the looser rules give up: a systematically different sampler (T × 0.95 and a 1.9ε logit bias, proofs
  forged) on the late policy, detected per file under each rule set.

Its last line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch
from rich.console import Console

from adversaries.samplers import WORKER, Profile, attacks
from bench.cleanup import exit_on_signals
from bench.attacks import (ATTACK_WARM_STEPS, DEFAULT_SPEC, STEERING_WARM_STEPS, Lab, build_checkpoint,
                           calibrated_profile, rate)
from bench.report import add_record_option, emit
from protocol.manifest import PolicyVerification
from protocol.runspec import load_run_spec
from validator.worker_margins import NullUse, WorkerMargins

ATTACKS = ("T x 0.95, forged", "logit bias 1.9 eps on answer tokens, forged")


def recalibrated(creation: Profile, late: Profile, base_spec) -> Profile:
    """The rules a validator applies to the late policy's files when its manifest carries `late`'s tolerances."""
    carried = PolicyVerification(**{k: getattr(late.verification, k) for k in PolicyVerification.model_fields})
    rules = creation.spec(base_spec).verification_for(carried)
    return Profile("recalibrated", creation.worker_dtype, rules, late.stated)


def honest_campaign(lab: Lab, profiles: list[Profile], files: int, workdir: Path, console: Console) -> dict:
    """`files` honest bf16 files of `lab`'s policy, alternately generated one row at a time and all at once,
    each judged under every profile; one worker book per profile."""
    out = {p.name: {"files": 0, "false_positives": 0, "reasons": Counter()} for p in profiles}
    books = {p.name: WorkerMargins(workdir / f"drift-{p.name}.json") for p in profiles}
    uses = {p.name: NullUse(files) for p in profiles}
    for f in range(files):
        batch = lab.honest(lab.spec, 3_000_000 + f, "bfloat16", batch_size=1 if f % 2 else None)
        for p in profiles:
            spec = p.spec(lab.spec)
            outcome = lab.judge(spec, batch)
            o = out[p.name]
            o["files"] += 1
            if not outcome.ok:
                o["false_positives"] += 1
                o["reasons"][outcome.reason.name] += 1
            elif outcome.margins:
                uses[p.name].add(outcome.margins["tokens"], outcome.margins["score"], spec.verification.margin_null())
                books[p.name].judge(WORKER, f"0x{f:064x}", outcome.margins["prompt_tokens"], outcome.margins["score"],
                                    spec.verification.margin_null(), spec.verification.worker_false_positive_rate)
        if (f + 1) % 100 == 0:
            console.print(f"honest: {f + 1}/{files} files; false positives "
                          f"{ {name: o['false_positives'] for name, o in out.items()} }")
    return {p.name: {**rate(out[p.name]["false_positives"], out[p.name]["files"]),
                     "reasons": dict(out[p.name]["reasons"]),
                     "worker_log_e_end": round(books[p.name].log_e_value(WORKER, p.verification.margin_null()), 2),
                     "margin_null_use": round(uses[p.name].use(), 3)}
            for p in profiles}


def attack_campaign(lab: Lab, profiles: list[Profile], files: int, console: Console) -> dict:
    table = attacks(None)
    result: dict = {}
    for p in profiles:
        spec = p.spec(lab.spec)
        result[p.name] = {}
        for name in ATTACKS:
            detected = sum(not lab.judge(spec, table[name](lab, p, spec, 4_000_000 + f)).ok for f in range(files))
            result[p.name][name] = rate(detected, files)
            console.print(f"\\[{p.name}] {name}: {detected}/{files} files detected")
    return result


def run(spec_path: Path, early: int, late: int, files: int, attack_files: int, calibration_prompts: int,
        console: Console) -> dict:
    torch.set_num_threads(1)
    spec = load_run_spec(spec_path)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-policy-drift-") as tmp:
        workdir = Path(tmp)
        early_folder = build_checkpoint(spec, workdir / "early", warm_steps=early)
        late_folder = build_checkpoint(spec, workdir / "late", warm_steps=late)
        console.print(f"calibrating the pool at creation ({early} warm steps) and the later policy ({late})…")
        creation = calibrated_profile(early_folder, spec_path, calibration_prompts)
        creation.name = "creation"
        later = calibrated_profile(late_folder, spec_path, calibration_prompts)
        profiles = [creation, recalibrated(creation, later, spec)]
        lab = Lab(late_folder, spec)
        result: dict = {
            "file": (f"{spec.prompts_per_submission} prompts x {spec.sampling.group_size} completions x <= "
                     f"{spec.sampling.max_tokens} tokens, every completion checked (q = 1)"),
            "early_warm_steps": early, "late_warm_steps": late, "calibration_prompts": calibration_prompts,
            "rules": {p.name: {"logit_tolerance": p.verification.logit_tolerance,
                               "margin_tail": p.verification.margin_tail} for p in profiles},
        }
        for name, r in result["rules"].items():
            console.print(f"{name} rules: logit tolerance {r['logit_tolerance']:.4g}, margin tails {r['margin_tail']}")
        result["honest"] = honest_campaign(lab, profiles, files, workdir, console)
        for name, r in result["honest"].items():
            console.print(f"honest bf16 files of the later policy under the {name} rules: {r['k']}/{r['n']} "
                          f"challenged {r['reasons']} (95 % CI {r['ci95']}); worker log e {r['worker_log_e_end']}; "
                          f"the accepted files use {r['margin_null_use']}x the margin null's mean (validator NullUse)")
        result["attacks"] = attack_campaign(lab, profiles, attack_files, console) if attack_files else {}
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="bounded form: 40 honest files, 5 per attack, 64 calibration prompts")
    p.add_argument("--files", type=int, help="honest files of the later policy (default 400; --quick 40)")
    p.add_argument("--attack-files", type=int, help="files per attack and rule set (default 20; --quick 5; 0: none)")
    p.add_argument("--calibration-prompts", type=int, help="validator calibrate --prompts (default 128; --quick 64)")
    p.add_argument("--early", type=int, default=ATTACK_WARM_STEPS, help="warm steps of the pool's base policy")
    p.add_argument("--late", type=int, default=STEERING_WARM_STEPS, help="warm steps of the later policy")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML (default examples/run-attacks.toml)")
    add_record_option(p)
    args = p.parse_args()
    files = args.files if args.files is not None else (40 if args.quick else 400)
    attack_files = args.attack_files if args.attack_files is not None else (5 if args.quick else 20)
    prompts = args.calibration_prompts or (64 if args.quick else 128)
    if files < 1 or attack_files < 0 or prompts < 1 or args.early < 0 or args.late < 0:
        p.error("--files and --calibration-prompts must be >= 1, --attack-files, --early and --late >= 0")
    try:
        result = run(args.spec, args.early, args.late, files, attack_files, prompts, Console())
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    emit(result, args, "policy_drift")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    sys.exit(main())
