"""Detection against a file's size: `python -m bench.file_size [--quick]`.

bench.attacks judges files of 4 prompts × 16 completions × ≤ 16 tokens (~550 checked tokens). The samplers that
keep every token inside the per-token bound — a logit bias under 2ε, and at the fp32 profile int8 weights or a 1 %
change of one layer with proofs forged by one prefill — are seen only by the margin test, through the few tokens
a file holds at a near-tie they reorder (~3 a file for the 1.9ε bias at the bf16 profile). A file test at a
per-file false-positive rate of 1e-6 cannot challenge a file on one such token, so what it catches depends on how
many checked tokens a file has. This measures it: the same pool and profiles as bench.attacks (its checkpoint,
`validator calibrate` for the bf16 profile), files of 4, 8, 16 and 32 prompts (× 16 completions, every completion
checked, q = 1) judged by the validator's checks (`validator.checks.check_contents`), and honest files of the same
sizes at both profiles. Per stream and size: files challenged with Wilson 95 % intervals, the checked tokens a
file, and after how many files the per-worker test (validator.worker_margins) challenged the stream's worker.

Printed: one table; last line: one JSON object.
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
from rich.table import Table

from adversaries.samplers import WORKER, Profile, attacks
from bench.cleanup import exit_on_signals
from bench.attacks import ATTACK_WARM_STEPS, DEFAULT_SPEC, Lab, build_checkpoint, calibrated_profile, rate
from bench.report import add_record_option, emit
from protocol.runspec import RunSpec, load_run_spec
from validator.worker_margins import WorkerMargins

SIZES = (4, 8, 16, 32)
"""Prompts a file (× the pool's 16 completions): ~550 to ~4,400 checked tokens on this policy."""
STREAMS = (("bf16", "logit bias 1.9 eps on answer tokens, forged"), ("bf16", "honest"),
           ("fp32", "logit bias 1.9 eps on answer tokens, forged"), ("fp32", "int8 weights, forged"),
           ("fp32", "layer 0 x 1.01, forged"), ("fp32", "honest"))
"""(profile, attack) pairs: the attacks that only the margin test sees at that profile, and honest workers."""


def sized(spec: RunSpec, prompts: int) -> RunSpec:
    return spec.model_copy(update={"prompts_per_submission": prompts})


def run_stream(lab: Lab, profile: Profile, attack: str, sizes: tuple[int, ...], files: int, nonce_base: int,
               workdir: Path) -> list[dict]:
    """`files` files of each size from one worker (honest or `attack`), each through the validator's checks and,
    when accepted, into that worker's margin book (one book per size)."""
    build = None if attack == "honest" else attacks(None)[attack]
    rows = []
    for i, prompts in enumerate(sizes):
        spec = profile.spec(sized(lab.spec, prompts))
        null = spec.verification.margin_null()
        book = WorkerMargins(workdir / f"{profile.name}-{attack[:12]}-{prompts}.json")
        detected, tokens, reasons, worker_at, thresholds = 0, 0, Counter(), None, []
        for f in range(files):
            nonce = nonce_base + 1000 * i + f
            batch = (lab.honest(spec, nonce, profile.worker_dtype) if build is None
                     else build(lab, profile, spec, nonce))
            outcome = lab.judge(spec, batch)
            detected += not outcome.ok
            tokens += outcome.checked_tokens
            reasons[outcome.reason.name if outcome.reason else "accepted"] += 1
            if outcome.margins:
                thresholds.append(null.threshold(outcome.margins["prompt_tokens"],
                                                 spec.verification.false_positive_rate / 2))
            if outcome.ok and outcome.margins and worker_at is None and book.judge(
                    WORKER, f"0x{nonce:064x}", outcome.margins["prompt_tokens"], outcome.margins["score"], null,
                    spec.verification.worker_false_positive_rate) is not None:
                worker_at = f + 1
        mean_tokens = tokens / files
        rows.append({"profile": profile.name, "attack": attack, "prompts": prompts, "tokens_per_file": round(mean_tokens),
                     "file_threshold": round(sum(thresholds) / len(thresholds), 2) if thresholds else None,
                     **rate(detected, files), "reasons": dict(reasons), "worker_challenged_after_files": worker_at})
    return rows


def run(spec_path: Path, sizes: tuple[int, ...], files: int, calibration_prompts: int, console: Console,
        streams: tuple[tuple[str, str], ...] = STREAMS) -> dict:
    torch.set_num_threads(1)
    spec = load_run_spec(spec_path)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-file-size-") as tmp:
        workdir = Path(tmp)
        folder = build_checkpoint(spec, workdir / "checkpoint", warm_steps=ATTACK_WARM_STEPS)
        console.print(f"calibrating the bf16 profile (validator calibrate --prompts {calibration_prompts})…")
        profiles = {"bf16": calibrated_profile(folder, spec_path, calibration_prompts),
                    "fp32": Profile("fp32", "float32", spec.verification)}
        lab = Lab(folder, spec)
        rows = []
        for s, (name, attack) in enumerate(streams):
            rows += run_stream(lab, profiles[name], attack, sizes, files, 100_000 * (s + 1), workdir)
            for r in rows[-len(sizes):]:
                console.print(f"\\[{name}] {attack}, {r['prompts']} prompts ({r['tokens_per_file']} tokens): "
                              f"{r['k']}/{r['n']} challenged {r['reasons']}")
    return {"profiles": {n: {"logit_tolerance": p.verification.logit_tolerance,
                             "margin_tail": p.verification.margin_tail, "margin_tokens": p.verification.margin_tokens}
                         for n, p in profiles.items()},
            "files_per_size": files, "rows": rows, "seconds": round(time.perf_counter() - started, 1)}


def print_table(result: dict, console: Console) -> None:
    table = Table(title="files challenged against checked tokens a file (every completion checked; 16 completions a "
                        "prompt)")
    for col in ("profile", "worker", "prompts", "tokens a file", "file threshold", "challenged", "Wilson 95 %",
                "worker test after"):
        table.add_column(col)
    for r in result["rows"]:
        table.add_row(r["profile"], r["attack"], str(r["prompts"]), str(r["tokens_per_file"]), str(r["file_threshold"]),
                      f"{r['k']}/{r['n']}", f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]",
                      str(r["worker_challenged_after_files"] or "–"))
    console.print(table)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="bounded form: files of 4 and 8 prompts, 3 files each")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="run spec TOML (default examples/run-attacks.toml)")
    p.add_argument("--files", type=int, help="files per stream and size (default 30; --quick 3)")
    p.add_argument("--sizes", help="prompts a file, comma-separated (default 4,8,16,32; --quick 4,8)")
    p.add_argument("--calibration-prompts", type=int, help="validator calibrate --prompts (default 512; --quick 128)")
    p.add_argument("--only", help="run only the streams whose 'profile: worker' contains one of these comma-separated "
                                  "words (e.g. 'bf16: logit')")
    add_record_option(p)
    args = p.parse_args()
    console = Console(width=160)
    try:
        sizes = tuple(int(x) for x in (args.sizes or ("4,8" if args.quick else ",".join(map(str, SIZES)))).split(","))
        if not sizes or min(sizes) < 1:
            raise ValueError("--sizes: positive prompt counts, comma-separated")
        files = args.files or (3 if args.quick else 30)
        if files < 1:
            raise ValueError("--files must be at least 1")
        words = [w.strip() for w in (args.only or "").split(",") if w.strip()]
        streams = tuple(st for st in STREAMS if not words or any(w in f"{st[0]}: {st[1]}" for w in words))
        if not streams:
            raise ValueError(f"--only {args.only!r} matches none of: " + "; ".join(f"{a}: {b}" for a, b in STREAMS))
        result = run(args.spec, sizes, files, args.calibration_prompts or (128 if args.quick else 512), console,
                     streams)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print_table(result, console)
    emit(result, args, "file_size")


if __name__ == "__main__":
    exit_on_signals()
    main()
