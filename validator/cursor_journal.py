"""A validator's event cursors saved by what changed, not rewritten whole at every poll.

An `EventCursor` keeps, besides its next block, the keys of the events it delivered within its reorg window (256
blocks): at a thousand workers 17k–34k events, a file of ~2.6 MB rewritten at every poll, which took 106–139 ms
(issue 46, finding 4). Here the cursor's file (`cursor.json`, the format `EventCursor` reads) is a snapshot, and each
commit appends to `cursor.json.log` one JSON line with what changed since the last one: top-level values set, and per
dict (the delivered events, the recorded block hashes) the entries put and the keys deleted — O(events of the poll)
written, nothing when nothing changed. Finding the changes still walks the window in memory (C set operations on the
dicts' views, about what serialising it cost; the cursor's own prune walks it each poll too): what this saves is the
writing. When the log outgrows the snapshot (`COMPACT_RATIO` times its size, at least `COMPACT_MIN_BYTES`) the state
is written as a new snapshot (atomically, as before) and the log emptied: amortised, still O(change).

Crash safety (kill -9 at any point): every line carries a sequence number and the snapshot the last one it includes
(`journal_seq`), so lines a crash left behind a newer snapshot are skipped; a torn last line (no newline, or not
JSON) is dropped — that commit did not happen, and the daemon sees its events again, as after a crash before a
commit. `prepare()`, before the cursor is made, folds the log into the snapshot, so `EventCursor` loads (and checks
chain, contract and events of) the latest state as it always did.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ledger_client.chain.errors import LedgerError

COMPACT_RATIO = 4
COMPACT_MIN_BYTES = 1 << 20
SEQ = "journal_seq"
"""The snapshot's key for the last log line it includes."""


def log_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + ".log")


def _replay(state: dict[str, Any], lines: list[bytes]) -> dict[str, Any]:
    """`state` with the log's complete lines applied, those the snapshot already includes skipped."""
    for raw in lines:
        try:
            change = json.loads(raw)
        except ValueError:
            break  # a torn last line: that commit did not happen
        if change["seq"] <= state.get(SEQ, 0):
            continue
        state.update(change.get("set", {}))
        for name, entries in change.get("put", {}).items():
            state.setdefault(name, {}).update(entries)
        for name, keys in change.get("del", {}).items():
            for key in keys:
                state.get(name, {}).pop(key, None)
        state[SEQ] = change["seq"]
    return state


def _write_snapshot(path: Path, state: dict[str, Any]) -> int:
    data = json.dumps(state)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(data)
    os.replace(tmp, path)
    return len(data)


def prepare(snapshot: Path) -> None:
    """Fold `snapshot`'s log, if any, into it (atomically), and empty the log: run before the cursor loads it."""
    log = log_path(snapshot)
    if not log.exists():
        return
    data = log.read_bytes()
    if snapshot.exists() and data.strip():
        complete = data[: data.rfind(b"\n") + 1].splitlines()
        try:
            saved = json.loads(snapshot.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            raise LedgerError(f"event cursor {snapshot} is damaged ({exc}); move it and {log.name} away to rescan "
                              "from the deployment block") from exc
        _write_snapshot(snapshot, _replay(saved, complete))
    log.unlink()


class CursorJournal:
    """Saves `state` (an `EventCursor.state`, made from `snapshot` after `prepare(snapshot)`) by appending changes."""

    def __init__(self, snapshot: Path, state: dict[str, Any]):
        self.snapshot = snapshot
        self.log = log_path(snapshot)
        self._saved = _copy(state)
        self._snapshot_bytes = snapshot.stat().st_size if snapshot.exists() else 0
        self._log_bytes = 0
        self._fd: int | None = None
        self._has_snapshot = snapshot.exists()

    def commit(self, state: dict[str, Any]) -> int:
        """Persist `state`: its changes since the last commit as one appended line (a new snapshot when the log has
        grown past it, or when there is none yet). Returns the bytes written."""
        if not self._has_snapshot or self._log_bytes > max(COMPACT_MIN_BYTES, COMPACT_RATIO * self._snapshot_bytes):
            return self._compact(state)
        change = _diff(self._saved, state)
        if change is None:
            return 0
        change["seq"] = state[SEQ] = self._saved.get(SEQ, 0) + 1
        line = (json.dumps(change) + "\n").encode()
        if self._fd is None:
            self._fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, line)
        self._log_bytes += len(line)
        self._saved = _copy(state)
        return len(line)

    def _compact(self, state: dict[str, Any]) -> int:
        state[SEQ] = self._saved.get(SEQ, 0) + 1
        written = self._snapshot_bytes = _write_snapshot(self.snapshot, state)
        if self._fd is not None:  # lines the snapshot includes: skipped on replay if a crash comes first
            os.ftruncate(self._fd, 0)
        self._has_snapshot, self._log_bytes, self._saved = True, 0, _copy(state)
        return written

    def saved(self) -> dict[str, Any]:
        """A copy of the state as last committed: what a cursor goes back to when a poll fails before its commit."""
        return _copy(self._saved)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}


def _diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """What turns `old` into `new` (None: nothing): top-level values set, dict entries put and keys deleted."""
    change: dict[str, Any] = {"set": {}, "put": {}, "del": {}}
    missing = object()
    for name, value in new.items():
        if name == SEQ:
            continue
        before = old.get(name, missing)
        if isinstance(value, dict) and isinstance(before, dict):
            if value == before:
                continue
            try:  # set operations on the views, in C (the cursor's own prune walks the window each poll too)
                put = dict(value.items() - before.items())
            except TypeError:  # an unhashable value
                put = {k: v for k, v in value.items() if before.get(k, missing) != v}
            gone = list(before.keys() - value.keys())
            if put:
                change["put"][name] = put
            if gone:
                change["del"][name] = gone
        elif before != value:
            change["set"][name] = value
    change = {k: v for k, v in change.items() if v}
    return change or None
