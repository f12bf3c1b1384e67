"""`make demo` as a user repeats it (issue 12): a run killed once an honest worker has submitted (its role processes
left behind, its pool and files on the chain), then a full run on the same devnet — one short run (one trainer step)
on real anvil + Kubo that stops the killed run's roles, submits the same honest files to a new pool, and ends with
every judged adversary submission challenged and no honest one, and a trainer that consumed only final verdicts:
nothing unaccepted, nothing overturned — then `devnet down` and `devnet up` on the same folder: a fresh chain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from examples.demo import PIDS_FILE, stop_leftover_roles
from ledger_client.chain.ledger import Ledger
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


@pytest.mark.timeout(2000)  # a bound on a hang (the killed run and the full one, each bounded at 900 s)
def test_demo_runs_again_after_a_kill_on_the_same_devnet_and_devnet_down_leaves_a_fresh_chain(devnet_dir, tmp_path):
    """A run killed once an honest worker has submitted; a full run on the same devnet, which stops the killed run's
    leftover roles and submits byte-identical honest files (the same run spec) to a new pool, yet meets no
    DuplicateWork and passes every check; `devnet down`, then `devnet up` in the same folder: a fresh chain. One full
    run, not two: a full run before the kill proved only what the full run after it does (the demo runs on a devnet
    it finds up, with an earlier run's files on it), and a full run after `devnet down` only what `devnet up` on the
    downed folder shows at no cost (the demo's first step is that `devnet up`; the killed run already ran on a
    devnet the demo started itself)."""
    out = tmp_path / "demo"
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

    again = _demo(devnet_dir, out)  # stops the leftovers, then runs in full on the same chain
    assert not any(_alive(pid) for pid in leftover)
    assert again["pool_id"] == 2  # the killed run's pool is the chain's first: the same devnet, not a fresh one

    run("deploy.cli", "down", "--state-dir", str(devnet_dir), cwd=tmp_path)
    up = json.loads(run("deploy.cli", "up", "--state-dir", str(devnet_dir), "--json", cwd=tmp_path).stdout)
    assert up["started"]
    assert Ledger.open(up["rpc_url"], Path(up["deployments"])).pool.pool_count() == 0  # a fresh chain: no pool


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
