"""One daemon at a time on a piece of state: a lock file held while the daemon runs.

A POSIX record lock (`fcntl.lockf`): the kernel drops it when the process dies, kill -9 included, so a restarted
daemon never finds a stale one. (Being per process, it does not keep two daemons of one process apart: a process
runs one daemon.)"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from cli.errors import UsageError


class DaemonLock:
    """`hold()` a lock file for this process; `release()` when the daemon stops."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def hold(cls, path: Path, busy: str) -> DaemonLock:
        """The lock on `path` (created if absent); UsageError(`busy`) when another process holds it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(busy) from None
        return cls(fd)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
