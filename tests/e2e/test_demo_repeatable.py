"""`make demo` as a user repeats it (issue 12): again on one devnet after a full run (killed once an honest worker
has submitted, its role processes left behind), and again after that kill and `devnet down` — each full run a short
one (one trainer step), on real anvil + Kubo, ending with every judged adversary submission challenged and no honest
one, and a trainer that consumed only final verdicts: nothing unaccepted, nothing overturned."""

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


@pytest.mark.timeout(2400)  # a bound on a hang (2 runs bounded at 900 s each, and the killed one)
def test_demo_runs_again_after_a_full_run_after_a_kill_and_after_devnet_down(devnet_dir, tmp_path):
    """A full run; a second run on the same devnet, killed once an honest worker has submitted (the same run spec,
    so byte-identical honest files, yet no DuplicateWork); `devnet down`; a full run that stops the killed run's
    leftover roles and starts a fresh chain. Two full runs, not three: a full run after the full one proved no more
    than the killed run's submission does, and cost a third of this test."""
    out = tmp_path / "demo"
    first = _demo(devnet_dir, out)

    shutil.rmtree(out)  # so that the wait below sees this run's logs
    killed = subprocess.Popen([sys.executable, "-m", "examples.demo", "--state-dir", str(devnet_dir), "--out",
                               str(out), *SHORT], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 900  # a bound on a hang
    while not _submitted(out / "logs" / "worker0.log"):
        assert killed.poll() is None and time.monotonic() < deadline, _tail(out / "logs" / "worker0.log")
        time.sleep(1)
    killed.send_signal(signal.SIGKILL)  # the demo dies; its validator, trainer and workers keep running
    killed.wait(10)
    leftover = [int(line.split()[0]) for line in (out / "roles.pids").read_text().splitlines()]
    assert any(_alive(pid) for pid in leftover)

    run("deploy.cli", "down", "--state-dir", str(devnet_dir), cwd=tmp_path)
    after_down = _demo(devnet_dir, out)  # stops the leftovers, then runs in full on a fresh chain
    assert not any(_alive(pid) for pid in leftover)
    assert first["pool_id"] == after_down["pool_id"] == 1  # the second full run is on a fresh chain


def _submitted(log: Path) -> bool:
    """The worker's log names a file it submitted on-chain."""
    return log.exists() and "submitted 0x" in log.read_text(errors="replace")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else f"no {log}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
