"""File helpers of the checkpoint code: hashing, atomic writes, free-space check, folder lock, progress, and the
verified local copy of a checkpoint (`FetchedCheckpoint`: what fetch returns and load reads)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ledger_client.ipfs.checkpoints.errors import DiskFull
from protocol.manifest import CheckpointManifest

HASH_BLOCK = 8 << 20


@dataclass(frozen=True)
class FetchedCheckpoint:
    """A verified local copy of a checkpoint."""

    manifest: CheckpointManifest
    manifest_cid: str
    digest: bytes
    path: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    retried: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    patched: list[str] = field(default_factory=list)  # shards rebuilt from the parent and the delta
    delta_fallback: str | None = None  # why a delta could not be used (the shards were downloaded instead)
    swarm: tuple[int, int] = (0, 1)  # (rank, count) of this node among the fetchers it saw
    prefetched_blocks: int = 0  # blocks brought in one by one in the swarm order before the shards were read


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
