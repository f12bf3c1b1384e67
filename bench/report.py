"""Printing a benchmark's figures: an aligned two-column table, then the JSON line scripts read; and, when asked
(`--record [PROFILE]`), keeping that line as the bench's newest result.

A result is `bench/results/<bench>[-<profile>].json`, one file per bench and profile, the newest only (a recorded
run replaces the file): {"bench", "profile" (or null), "command", "date" (UTC, when the run started), "commit"
(`git rev-parse --short HEAD`), "dirty" (tracked files changed), "machine" (short words), "wall_s", "provenance",
"figures": the JSON line}. docs/benchmarks.md's table is generated from these files (`python -m bench.doc`).
Recording is off by default, so that tests and casual runs leave the tree as it was.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PROFILE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
"""A profile names one configuration of a bench (e.g. `quick`, `q1`): lower case, digits, `_`, `.`, `-`."""
PYTHON = ".venv/bin/python"
"""How a recorded command names the interpreter: the project's venv, as the docs' commands do."""
STARTED = datetime.datetime.now(datetime.UTC)
_STARTED_MONOTONIC = time.monotonic()
"""When this process imported the module: every bench imports it at start-up, so this is when the run began."""


def print_rows(rows: list[tuple[str, str]], result: dict, args: argparse.Namespace | None = None,
               bench: str | None = None) -> None:
    """Print `rows` as `name  value`, names padded to the longest, then `result` as one JSON line (`emit`)."""
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>10}")
    emit(result, args, bench)


def profile_name(text: str) -> str:
    if text and not PROFILE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"a profile is 1-40 of a-z 0-9 _ . - (starting with a letter or digit), "
                                         f"got {text!r}")
    return text


def add_record_option(parser: argparse.ArgumentParser) -> None:
    """`--record [PROFILE]`: also write the run's result to bench/results/ (module docstring)."""
    parser.add_argument("--record", nargs="?", const="", type=profile_name, metavar="PROFILE",
                        help="also write this run's JSON line, with its command, date, commit and machine, to "
                             "bench/results/<bench>[-PROFILE].json, replacing the newest result there "
                             "(docs/benchmarks.md is generated from those files: python -m bench.doc)")


def emit(result: dict, args: argparse.Namespace | None, bench: str | None, argv: list[str] | None = None,
         figures: dict | None = None) -> None:
    """Print `result` as the JSON line; with `--record`, record `figures` (default: `result`) as `bench`'s newest
    result, its command rebuilt from `argv` (default: this process's arguments)."""
    print(json.dumps(result), flush=True)
    profile = getattr(args, "record", None)
    if profile is None or bench is None:
        return
    path = record(bench, profile or None, result if figures is None else figures,
                  sys.argv[1:] if argv is None else argv)
    print(f"recorded {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", file=sys.stderr)


def results_path(bench: str, profile: str | None, folder: Path | None = None) -> Path:
    return (folder or RESULTS) / (f"{bench}-{profile}.json" if profile else f"{bench}.json")


def command_of(bench: str, argv: list[str]) -> str:
    """The command that reruns this configuration: `argv` without its `--record [PROFILE]`, a machine's own paths
    (absolute, or from ~) written PATH — the command is published, the path means nothing on another machine."""
    kept, skip_next = [], False
    for i, arg in enumerate(argv):
        if skip_next:
            skip_next = False
            continue
        name = arg.split("=", 1)[0]
        if len(name) > 4 and "--record".startswith(name):  # argparse accepts unambiguous abbreviations
            skip_next = "=" not in arg and i + 1 < len(argv) and not argv[i + 1].startswith("-")
            continue
        kept.append(_without_machine_path(arg))
    return shlex.join([PYTHON, "-m", f"bench.{bench}", *kept])


def _without_machine_path(arg: str) -> str:
    name, eq, value = arg.rpartition("=") if arg.startswith("-") and "=" in arg else ("", "", arg)
    return f"{name}{eq}PATH" if value.startswith(("/", "~")) else arg


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine() -> str:
    """Short words: cores, memory, platform, the GPU when torch sees one, the load average at the end of the run."""
    words = [f"{os.cpu_count()} cores"]
    try:
        words.append(f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB")
    except (ValueError, OSError, AttributeError):
        pass
    words.append(f"{platform.system()} {platform.machine()}")
    torch = sys.modules.get("torch")  # only when the bench itself uses torch
    if torch is not None and torch.cuda.is_available():
        words.append(torch.cuda.get_device_name())
    words.append(f"load {os.getloadavg()[0]:.1f} at the end")
    return ", ".join(words)


def record(bench: str, profile: str | None, figures: dict, argv: list[str], folder: Path | None = None) -> Path:
    """Write `figures` as bench/results/<bench>[-<profile>].json (module docstring); the path."""
    if profile is not None:
        profile_name(profile)
    status = _git("status", "--porcelain", "--untracked-files=no")
    doc = {
        "bench": bench, "profile": profile, "command": command_of(bench, argv),
        "date": STARTED.strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": None if status is None else bool(status), "machine": machine(),
        "wall_s": round(time.monotonic() - _STARTED_MONOTONIC, 1),
        "provenance": f"recorded by `python -m bench.{bench} --record{' ' + profile if profile else ''}`",
        "figures": figures,
    }
    path = results_path(bench, profile, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    part.replace(path)
    return path
