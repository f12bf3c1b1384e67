"""Ctrl-C and SIGTERM while a command waits (issue 47, finding 5: Ctrl-C during a start-up was lost): the command
stops in one line — `error: interrupted`, exit 130, or `error: terminated`, exit 143 — with no traceback, and
nothing is published or written after the signal. Each command runs as its console script runs it, in its own
process; the signal is sent once its progress line says it is in the wait (no sleep, no timing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cli.console import EXIT_INTERRUPTED, EXIT_TERMINATED
from ledger_client.ipfs.kubo import KuboClient
from tests.support.paths import ROOT
from tests.support.processes import ctrl_c_as_in_a_terminal

SIGNALS = [(signal.SIGINT, EXIT_INTERRUPTED, "error: interrupted"), (signal.SIGTERM, EXIT_TERMINATED, "error: terminated")]


def _console_script(name: str, argv: list[str], cwd: Path) -> subprocess.Popen:
    """`name` (a pyproject console script) started as pip's script starts it."""
    module, attr = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"][name].split(":")
    script = f"import sys; from {module} import {attr}; sys.exit({attr}())"
    return subprocess.Popen([sys.executable, "-c", script, *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=ctrl_c_as_in_a_terminal)


def _signalled_when(proc: subprocess.Popen, said: str, signum: int) -> tuple[list[str], list[str]]:
    """Read the command's stderr until a line starts with `said`, send `signum`, and return the lines read up to
    that one and those written after it (stderr) once the command has ended."""
    before = []
    for line in proc.stderr:
        before.append(line.rstrip("\n"))
        if line.startswith(said):
            break
    else:
        raise AssertionError(f"the command ended without saying {said!r}: {before}")
    proc.send_signal(signum)
    _, rest = proc.communicate(timeout=120)
    return before, rest.splitlines()


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("signum", "code", "line"), SIGNALS)
def test_checkpoint_fetch_stops_while_it_waits_for_a_manifest(signum: int, code: int, line: str, kubo_swarm,
                                                              tmp_path: Path) -> None:
    """An online node asked for a manifest nobody serves waits up to --timeout: a signal ends the wait."""
    (node,) = kubo_swarm(1)
    store = tmp_path / "store"
    proc = _console_script("checkpoint", ["fetch", "0x" + "ab" * 32, "--kubo-api", node.api_multiaddr, "--store",
                                          str(store), "--timeout", "300"], tmp_path)
    before, after = _signalled_when(proc, "checkpoint fetch: asking the Kubo node", signum)
    assert proc.returncode == code and after == [line], (proc.returncode, before, after)
    assert not store.exists() or not any(store.iterdir())  # nothing half-written


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("signum", "code", "line"), SIGNALS)
def test_trainer_init_stops_in_its_warm_start_and_publishes_nothing(signum: int, code: int, line: str, kubo_node,
                                                                    tmp_path: Path) -> None:
    """Issue 47: `trainer init` interrupted at 15 s and 20 s published the policy and exited 0."""
    with KuboClient(kubo_node.api_multiaddr) as kubo:
        pinned = kubo.pin_ls()
        proc = _console_script("trainer", ["init", "--run-spec", str(ROOT / "examples/run.toml"), "--kubo-api",
                                           kubo_node.api_multiaddr, "--warm-steps", "100000",
                                           "--devnet-dir", str(tmp_path / "no-devnet")], tmp_path)
        before, after = _signalled_when(proc, "trainer init: warm start on", signum)
        assert proc.returncode == code and after[-1:] == [line], (proc.returncode, before, after)
        assert "Traceback" not in "\n".join(after) and all(not text.startswith("error:") for text in after[:-1])
        assert kubo.pin_ls() == pinned  # no checkpoint, no run spec
    assert not (tmp_path / "no-devnet").exists()
