"""A daemon's lock file (cli/daemon_lock.py): another process is refused with the daemon's own one-line message
while the holder runs, and the lock is free once the holder dies, by kill -9 too. The validator's state folder
(tests/unit/validator/test_state_folder.py) and the worker's journal hold one."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from cli.daemon_lock import DaemonLock
from cli.errors import UsageError
from tests.support.paths import ROOT


def test_a_second_process_is_refused_until_the_holder_is_killed(tmp_path) -> None:
    lock = tmp_path / "folder" / "journal.lock"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from cli.daemon_lock import DaemonLock
        DaemonLock.hold(Path({str(lock)!r}), "busy")
        print("held", flush=True)
        sys.stdin.read()
        """)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match="^work folder in use$"):
            DaemonLock.hold(lock, "work folder in use")
    finally:
        holder.kill()
        holder.wait(30)
    DaemonLock.hold(lock, "work folder in use").release()


def test_a_released_lock_can_be_held_again_in_the_same_process(tmp_path) -> None:
    first = DaemonLock.hold(tmp_path / "a.lock", "busy")
    first.release()
    first.release()  # twice is harmless
    DaemonLock.hold(tmp_path / "a.lock", "busy").release()
