"""A bench stopped by SIGTERM (what `timeout` and CI send) or SIGINT stops the anvil it started, as one that finished
does (bench/cleanup.py; issue 46, finding 7): a bench-shaped program — `exit_on_signals()` in its `__main__`, anvil
started and stopped in a `try/finally` as bench.gas does — is signalled once its anvil is up. Without the handler,
SIGTERM left anvil running."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from deploy.anvil import pid_is, stop_pid
from tests.support.paths import ROOT
from tests.support.processes import ctrl_c_as_in_a_terminal

BENCH = """
import signal, sys, tempfile
from pathlib import Path
from bench.cleanup import exit_on_signals
from deploy.anvil import start_anvil

if sys.argv[1] == "handled":
    exit_on_signals()
with tempfile.TemporaryDirectory() as tmp:
    anvil = start_anvil(Path(tmp) / "anvil.log")
    try:
        print(anvil.pid, flush=True)
        signal.pause()
    finally:
        anvil.stop()
"""


def _bench_with_anvil_up(mode: str) -> tuple[subprocess.Popen, int]:
    bench = subprocess.Popen([sys.executable, "-c", BENCH, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             preexec_fn=ctrl_c_as_in_a_terminal)
    line = bench.stdout.readline()  # anvil is up
    assert line.strip().isdigit(), f"the bench did not start its anvil (exit {bench.wait()})"
    pid = int(line)
    assert pid_is(pid, "anvil")
    return bench, pid


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGTERM, 128 + signal.SIGTERM),
                                                   (signal.SIGINT, -signal.SIGINT)])
def test_a_signalled_bench_stops_its_anvil(signum, exit_code):
    bench, anvil = _bench_with_anvil_up("handled")
    bench.send_signal(signum)
    assert bench.wait(timeout=60) == exit_code  # SIGINT: KeyboardInterrupt, re-raised as the signal at exit
    assert not pid_is(anvil, "anvil")


def test_without_the_handler_sigterm_left_anvil_running():
    bench, anvil = _bench_with_anvil_up("unhandled")
    bench.send_signal(signal.SIGTERM)
    assert bench.wait(timeout=60) == -signal.SIGTERM
    try:
        assert pid_is(anvil, "anvil")  # orphaned: the finally never ran
    finally:
        stop_pid(anvil, "anvil")
