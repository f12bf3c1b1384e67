"""Seconds a console command takes to answer `--help` and to refuse bad input, against `python -c pass`.

Each command runs as its console script does (the entry point of pyproject.toml's [project.scripts], called in a
fresh `python -c`), from the repository root, with nothing up (no devnet): its `--help`, then one bad input (a bad
number, a missing file, a malformed URL or address) that it must refuse in one `error:` line before web3, torch or
pyarrow load. Every figure is the median of `--runs` runs; `ratio` is it over the same run's `python -c pass`.
The goal (issue 47, finding 9): `--help` within 1 s and a refusal within 2 s on an idle 2-core machine. Which
modules each case leaves unimported is held by tests/unit/cli/test_startup_imports.py, not timed there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.report import add_record_option, print_rows

ROOT = Path(__file__).resolve().parent.parent
MISSING = "missing.toml"
"""A file name no case creates: each case runs in an empty folder, so the file is absent."""


@dataclass(frozen=True)
class Command:
    name: str
    entry: str
    """`module:function`, as pyproject.toml's [project.scripts] names it."""
    help: tuple[str, ...]
    bad: tuple[tuple[str, ...], ...]
    """Bad inputs, each refused with exit 2; the first is the bench's."""


COMMANDS = (
    Command("devnet", "deploy:devnet_command", ("deploy", "--help"),
            (("advance", "soon"), ("mint", "0x12=1tokens"), ("deploy", "--rpc-url", "http://x", "--unbonding-delay", "5"))),
    Command("pool", "deploy:pool_command", ("status", "--help"),
            (("status", "0"), ("create", "--config", MISSING), ("fund", "1", "5ether", "--chain-id", "x"))),
    Command("checkpoint", "deploy:checkpoint_command", ("fetch", "--help"),
            (("fetch", "0x12", "--parallel", "0"), ("publish", "model", "--step", "-1"), ("fetch", "0x12"))),
    Command("worker", "worker:main", ("start", "--help"),
            (("start", "--pool", "999", "--config", MISSING), ("start", "--pool", "1", "--explorer", "ftp:/x"),
             ("start", "--pool", "1", "--device", "tpu"), ("status", "--pool", "0"))),
    Command("validator", "validator:main", ("start", "--help"),
            (("start", "--pool", "x"), ("calibrate", "--checkpoint", ".", "--run-spec", MISSING),
             ("start", "--pool", "1", "--device", "tpu"))),
    Command("trainer", "trainer:main", ("start", "--help"),
            (("init", "--run-spec", MISSING), ("start", "--pool", "1", "--config", MISSING),
             ("start", "--pool", "1", "--metrics-port", "70000"), ("local", "--config", MISSING),
             ("local", "--nproc", "0"), ("local", "--loss.delta", "0.5"))),
    Command("explorer", "dashboard:main", ("start", "--help"),
            (("start", "--port", "70000"), ("start", "--chain-id", "0"))),
)
"""Every console script of pyproject.toml's [project.scripts]."""


def script(entry: str, probe: bool = False) -> str:
    """The `python -c` program that runs `entry` as its console script does; with `probe`, it also prints, at exit,
    which of torch, web3 and pyarrow were imported (`loaded: …` on stderr)."""
    module, function = entry.split(":")
    report = ("import atexit; atexit.register(lambda: print('loaded:', *sorted(m for m in ('torch', 'web3', 'pyarrow') "
              "if m in sys.modules), file=sys.stderr)); ") if probe else ""
    return f"import sys; {report}from {module} import {function}; sys.exit({function}())"


def run(entry: str, args: tuple[str, ...], cwd: Path, code: Path = ROOT, probe: bool = False,
        timeout: float = 600) -> subprocess.CompletedProcess:
    """One run of a console command, from `cwd`, importing the project from `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("PROOFSWARM_EXPLORER_URL", None)
    return subprocess.run([sys.executable, "-c", script(entry, probe), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def seconds(argv: list[str], cwd: Path, code: Path, runs: int, expect: int | None = None) -> float:
    """The median wall time of `runs` runs of `argv` (a whole process); a run that exits other than `expect` fails."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("PROOFSWARM_EXPLORER_URL", None)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        times.append(time.perf_counter() - start)
        if expect is not None and done.returncode != expect:
            raise SystemExit(f"{' '.join(argv[3:])}: exit {done.returncode}, not {expect}: {done.stderr.strip()[-300:]}")
    return round(statistics.median(times), 3)


def measure(runs: int, code: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-cli-startup-") as tmp:
        cwd = Path(tmp)
        baseline = seconds([sys.executable, "-c", "pass"], cwd, code, runs)
        commands = {}
        for c in COMMANDS:
            help_s = seconds([sys.executable, "-c", script(c.entry), *c.help], cwd, code, runs, expect=0)
            bad_s = seconds([sys.executable, "-c", script(c.entry), *c.bad[0]], cwd, code, runs, expect=2)
            commands[c.name] = {"help": " ".join((c.name, *c.help)), "help_s": help_s,
                                "help_ratio": round(help_s / baseline, 1), "bad": " ".join((c.name, *c.bad[0])),
                                "bad_s": bad_s, "bad_ratio": round(bad_s / baseline, 1)}
    return {"runs": runs, "python_pass_s": baseline, "commands": commands,
            "help_max_s": max(c["help_s"] for c in commands.values()),
            "bad_max_s": max(c["bad_s"] for c in commands.values()), "load_1min": round(os.getloadavg()[0], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each case; the median counts (default 7)")
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="import the commands from this checkout instead (an older commit, for a before figure)")
    add_record_option(parser)
    args = parser.parse_args()
    result = measure(args.runs, args.code.resolve())
    print(f"median of {args.runs} runs; python -c pass {result['python_pass_s']} s; load {result['load_1min']}")
    rows = []
    for c in result["commands"].values():
        rows += [(c["help"], f"{c['help_s']} s"), (c["bad"], f"{c['bad_s']} s")]
    print_rows(rows, result, args, "cli_startup")


if __name__ == "__main__":
    main()
