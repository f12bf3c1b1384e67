"""Running a person's shell session in a test: the guides' blocks and the geth walk-throughs are bash scripts that start
the project's daemons in the background and wait on the chain through the commands' own output."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PROLOGUE = "set -em\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
"""errexit, job control (each background job its own process group), and every background job stopped when the
script ends, however it ends."""


@dataclass
class ShellRun:
    """A finished script: its exit status, its output, and the tail of every *.log file in its folder."""

    returncode: int
    out: str
    err: str
    logs: str

    def check(self) -> str:
        """The script's stdout; fails the test with the output and the logs unless it exited 0 and nothing printed
        a traceback."""
        assert self.returncode == 0, self.out[-4000:] + self.err[-4000:] + self.logs
        assert "Traceback" not in self.err + self.logs, self.err + self.logs
        return self.out


def run_script(script: str, cwd: Path, env: dict[str, str], timeout: float) -> ShellRun:
    """Run `script` in bash after PROLOGUE. A script that outlives `timeout` (a wait that never ends) gets SIGTERM:
    its EXIT trap stops the daemons it started, and the run comes back with what they logged."""
    shell = subprocess.Popen(["bash", "-c", PROLOGUE + script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = shell.communicate(timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGTERM)
        out, err = shell.communicate(timeout=60)
        err += f"\n(the script was stopped after {timeout:.0f} s)"
    logs = "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(cwd.glob("*.log")))
    return ShellRun(shell.returncode, out, err, logs)


class Budget:
    """One test's time for all its scripts, so that a script that hangs is stopped, with its logs, before
    pytest-timeout kills the test without them. A bound on a hang, never a pace: set it far above the slowest run."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()
