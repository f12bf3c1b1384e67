"""Which submissions the trainer consumed, as an append-only log: O(1) membership, O(new) written.

The trainer consumes each accepted submission exactly once, so it must know every work id it already took — at a
thousand workers that is millions of ids. Keeping them in the checkpoint rewrote the whole list at every step (and a
list's `in` grew with it); here they live in a hash table in memory (a dict's keys) and in `consumed.log` on disk, one work id per line,
each line `0x` + 64 hex digits + newline (LINE bytes). A poll appends what it consumed; a checkpoint records only how
many lines there were (`entries`), and a resume truncates the log back to that count, so what was consumed after the
last checkpoint — learned by steps the crash lost — is consumed again, and nothing is lost or counted twice.

A kill -9 mid-append leaves at most a torn last line (shorter than LINE): it lies past every recorded count and is
dropped on resume. A log shorter than a checkpoint's count, or a line that is not a work id, is a `ConsumedLogError`
(the run directory was damaged or mixed with another run's): never guessed around.

Without a path the log is kept in memory (tests, one process); `state()` then carries the ids themselves, the form
checkpoints had before this log, which `restore()` still reads (an old checkpoint's list becomes the log).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from trainer.checkpoint import TrainerStateError

LINE = len("0x") + 64 + 1
"""Bytes per logged work id: `0x`, 64 lower-case hex digits, a newline."""
_LINES = re.compile(rb"(?:0x[0-9a-f]{64}\n)*")
_WORK_ID = re.compile(r"0x[0-9a-f]{64}")
_CHUNK = LINE << 16
"""A resume reads the log this many bytes at a time (whole lines, ~4 MB)."""


class ConsumedLogError(TrainerStateError):
    """The consumed log does not match the checkpoint that names it (shorter than its count, or not work ids)."""


class ConsumedLog:
    """The set of consumed work ids (`in`, `len`, iteration), appended to `path` (or kept in memory)."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self._ids: dict[str, None] = {}
        """The ids, as a dict's keys: a dict of strings is not tracked by the garbage collector, a set is — a full
        collection walked a 10 M set for seconds (bench.intake's worst step, before)."""
        self._order: list[str] | None = [] if path is None else None  # in memory only: the log itself
        self._fd: int | None = None
        self._ready = False

    # -- the set ------------------------------------------------------------------------------

    def __contains__(self, work_id: object) -> bool:
        self._open()
        return work_id in self._ids

    def __len__(self) -> int:
        self._open()
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        self._open()
        return iter(self._ids)

    def add(self, work_ids: Iterable[str]) -> None:
        """Log `work_ids` (not consumed before) as consumed: one append, flushed to the OS before returning."""
        self._open()
        new = list(work_ids)
        for work_id in new:
            if not _WORK_ID.fullmatch(work_id):
                raise ValueError(f"not a work id: {work_id!r}")
            if work_id in self._ids:
                raise ValueError(f"{work_id} is consumed already")
        if len(set(new)) != len(new):  # two lines, one count: a resume would truncate inside trained history
            raise ValueError("the same work id twice in one batch of consumed work")
        if not new:
            return
        if self._fd is not None:
            data = "".join(f"{w}\n" for w in new).encode()
            written = os.write(self._fd, data)
            if written != len(data):  # a full disk: leave a torn line for the next resume to drop
                raise OSError(f"{self.path}: wrote {written} of {len(data)} bytes")
        else:
            assert self._order is not None
            self._order.extend(new)
        self._ids.update(dict.fromkeys(new))

    # -- checkpoints ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the count of logged ids (made durable first), or in memory the ids themselves."""
        self._open()
        if self._fd is None:
            assert self._order is not None
            return {"consumed": list(self._order)}
        os.fsync(self._fd)
        return {"consumed_log": {"entries": len(self._ids)}}

    def restore(self, state: dict[str, Any]) -> None:
        """Back to a checkpoint's `state()`: the log truncated to its count (what came after is consumed again), or an
        old checkpoint's list of ids written as the log."""
        if "consumed_log" in state:
            self._open(keep=int(state["consumed_log"]["entries"]))
        else:
            self._open(keep=0)
            self.add(dict.fromkeys(state.get("consumed", [])))  # an old checkpoint (or in memory): its ids in order

    def _open(self, keep: int | None = None) -> None:
        """Load the log on first use, keeping its first `keep` ids (None: a source never restored starts a fresh
        run, so none); with `keep` given again later, truncate to it."""
        if self._ready and keep is None:
            return
        keep = keep or 0
        if self.path is None:
            assert self._order is not None
            if keep > len(self._order):
                raise ConsumedLogError(f"the checkpoint counts {keep} consumed ids, the log in memory has "
                                       f"{len(self._order)}")
            del self._order[keep:]
            self._ids = dict.fromkeys(self._order)
            self._ready = True
            return
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(self._fd).st_size
        if size < keep * LINE:
            raise ConsumedLogError(f"{self.path} holds {size // LINE} consumed ids, the checkpoint counts {keep}: "
                                   f"the log was cut or belongs to another run")
        if self._ready and keep * LINE == size:
            return
        if self._ready:  # drop what came after `keep` from the set
            dropped = os.pread(self._fd, size - keep * LINE, keep * LINE).decode(errors="replace")
            for i in range(0, len(dropped), LINE):
                self._ids.pop(dropped[i:i + LINE - 1], None)
        else:  # read only what is kept (a torn line, and ids consumed after the checkpoint, are dropped)
            self._ids = {}
            for start in range(0, keep * LINE, _CHUNK):
                data = os.pread(self._fd, min(_CHUNK, keep * LINE - start), start)
                if not _LINES.fullmatch(data):
                    raise ConsumedLogError(f"{self.path} is not a log of work ids (one 0x-prefixed hex id a line)")
                self._ids.update(dict.fromkeys(data.decode().split()))
        os.ftruncate(self._fd, keep * LINE)
        self._ready = True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._ready = False


def read_consumed(path: Path) -> list[str]:
    """The work ids a consumed log holds, in the order they were consumed (for audits; a torn last line dropped)."""
    data = path.read_bytes()
    return data[: len(data) - len(data) % LINE].decode().split()


class FollowerLog(ConsumedLog):
    """A follower rank's stand-in (torchrun): the main rank polls, consumes and keeps the log; a follower restores
    the same checkpoint, whose count names ids it does not hold, and never consumes."""

    def restore(self, state: dict[str, Any]) -> None:
        self._ids, self._ready = {}, True

    def add(self, work_ids: Iterable[str]) -> None:
        if list(work_ids):
            raise RuntimeError("only the main rank consumes work")

    def state(self) -> dict[str, Any]:
        return {"consumed_log": {"entries": 0}}
