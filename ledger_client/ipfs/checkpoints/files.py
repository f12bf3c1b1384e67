"""File helpers of the checkpoint code: hashing, atomic writes, free-space check, folder lock, progress."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from ledger_client.ipfs.checkpoints.errors import DiskFull

HASH_BLOCK = 8 << 20


class TransferProgress(Protocol):
    """Receives progress of a publish or fetch (called from several threads)."""

    def start(self, total_bytes: int, total_files: int) -> None: ...

    def advance(self, n_bytes: int) -> None: ...

    def file_done(self, name: str) -> None: ...


class NoProgress:
    def start(self, total_bytes: int, total_files: int) -> None:
        pass

    def advance(self, n_bytes: int) -> None:
        pass

    def file_done(self, name: str) -> None:
        pass


def sha256_file(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(HASH_BLOCK):
            hasher.update(chunk)
    return hasher.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise DiskFull(f"disk full writing {path}") from None
        raise


def check_free_space(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise DiskFull(f"need {needed / 2**20:.1f} MiB in {folder}, only {free / 2**20:.1f} MiB free")


@contextmanager
def exclusive_lock(folder: Path) -> Iterator[None]:
    """One fetcher per checkpoint folder at a time (a second one waits)."""
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
