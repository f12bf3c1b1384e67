"""`make demo` as a user repeats it (issue 12): on one devnet after a full run and a run killed mid-way (its
role processes left behind), and again after `devnet down` — each run a short one (one trainer step), on real
anvil + Kubo, each ending with every judged adversary submission challenged and no honest one, and a trainer
that consumed only final verdicts: nothing unaccepted, nothing overturned."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from examples.demo import PIDS_FILE, stop_leftover_roles
from tests.e2e.test_cli import ROOT, run

SHORT = ["--steps", "1", "--eval-every", "1000", "--eval-problems", "10", "--timeout", "600", "--settle-timeout", "0"]
"""One trainer step (the default warm start: a policy too weak to vary its rewards within a group would give
only zero-advantage groups, which the trainer drops)."""


def _demo(state: Path, out: Path, *extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "examples.demo", "--state-dir", str(state), "--out", str(out),
                           *SHORT, *extra], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert all(summary["checks"].values()), summary
    assert summary["honest_challenged"] == 0 and summary["submitted"] > 0
    assert summary["consumed"] > 0 and summary["consumed_unaccepted"] == summary["consumed_overturned"] == 0
    return summary


@pytest.fixture
def devnet_dir(tmp_path, kubo_node):  # kubo_node: skips unless a real Kubo is installed
    state = tmp_path / "devnet"
    yield state
    stop_leftover_roles(tmp_path / "demo" / PIDS_FILE)  # a failed or timed-out run leaves no process behind
    run("deploy.cli", "down", "--state-dir", str(state), cwd=tmp_path, ok=False)


@pytest.mark.timeout(3000)  # a bound on a hang (3 runs, each bounded at 900 s): 1,367 s in `make test`
def test_demo_runs_again_after_a_full_run_after_a_kill_and_after_devnet_down(devnet_dir, tmp_path):
    out = tmp_path / "demo"
    first = _demo(devnet_dir, out)

    shutil.rmtree(out)  # so that the wait below sees this run's logs
    killed = subprocess.Popen([sys.executable, "-m", "examples.demo", "--state-dir", str(devnet_dir), "--out",
                               str(out), *SHORT], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 300
    while not (out / "logs" / "adversary.log").exists():  # every role is up
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.5)
    time.sleep(5)
    killed.send_signal(signal.SIGKILL)  # the demo dies; its validator, trainer and workers keep running
    killed.wait(10)
    leftover = [int(line.split()[0]) for line in (out / "roles.pids").read_text().splitlines()]
    assert any(_alive(pid) for pid in leftover)
    again = _demo(devnet_dir, out)  # stops the leftovers, then runs in full: same devnet, same run spec,
    assert not any(_alive(pid) for pid in leftover)  # byte-identical honest files, yet no DuplicateWork
    assert again["pool_id"] == first["pool_id"] + 2

    run("deploy.cli", "down", "--state-dir", str(devnet_dir), cwd=tmp_path)
    after_down = _demo(devnet_dir, out)
    assert after_down["pool_id"] == 1  # a fresh chain


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
