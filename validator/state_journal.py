"""A validator's state files kept as a snapshot plus an append-only log of changes, so that a change costs its own
size, not the state's (issue 46: court.json and worker_margins.json were rewritten whole at every change, O(pool
history) per verdict and O(history²) in all).

The snapshot (`<name>.json`) is one JSON object, the state as of its `journal_seq`-th change (a file written before
the journal has none: change 0, so an old whole-file state is read as it was and migrated as it is). Each change is
one line appended to `<name>.json.log`: a JSON object with its sequence number `seq` and what the state's owner
needs to apply it (`apply(state, change)`). When the log outgrows the snapshot (`COMPACT_RATIO` times its size, at
least `COMPACT_MIN_BYTES`), the owner writes the state as a new snapshot (a temporary file renamed over the old) and
the log is removed: amortised, a change still costs O(its size).

Crash safety (kill -9 at any point): lines the snapshot already includes (a crash between a compaction's rename and
the log's removal) are skipped by their `seq`; a torn last line (no newline: killed mid-append) is a change that did
not happen, cut off at load — its owner saves before it acts, so nothing it did depended on it. Anything else — a
snapshot that is not a JSON object, a complete line that is not one, a gap in the sequence — is a damaged file,
refused with one `StateFileDamaged` naming it: never guessed around.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger_client.chain.errors import LedgerError

COMPACT_RATIO = 4
COMPACT_MIN_BYTES = 1 << 20
SEQ = "journal_seq"
"""The snapshot's key for the last log line it includes."""

Change = dict[str, Any]


class StateFileDamaged(LedgerError):
    """A validator state file or its log cannot be read back (not JSON, or changes missing)."""


def log_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + ".log")


def write_snapshot(path: Path, state: dict[str, Any], durable: bool) -> int:
    """Write `state` to `path` atomically (a temporary file renamed over it; fsynced first when `durable`);
    returns the bytes written."""
    data = json.dumps(state).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    return len(data)


class StateJournal:
    """One state file and its log: `load()` once, then `append()` each change and `compact()` when `due()`.

    `what` names the state in errors ("court duties"); `durable` fsyncs every append and snapshot (state whose loss
    costs stake: a vote's salt, a verdict's count) — without it a kill -9 still loses nothing, a power cut may."""

    def __init__(self, snapshot: Path, what: str, apply: Callable[[dict[str, Any], Change], None],
                 durable: bool = True):
        self.snapshot = Path(snapshot)
        self.log = log_path(self.snapshot)
        self.what, self.apply, self.durable = what, apply, durable
        self.seq = 0
        self._snapshot_bytes = 0
        self._log_bytes = 0
        self.written = 0
        """Bytes this journal wrote, log lines and snapshots (bench.state_files)."""

    def load(self) -> dict[str, Any]:
        """The state: the snapshot (empty without one) with the log's complete lines applied; a torn last line is
        cut off the log."""
        state: dict[str, Any] = {}
        if self.snapshot.exists():
            raw = self.snapshot.read_bytes()
            try:
                state = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise self._damaged(self.snapshot, f"not JSON: {exc}") from exc
            if not isinstance(state, dict):
                raise self._damaged(self.snapshot, "not a JSON object")
            self._snapshot_bytes = len(raw)
        self.seq = state.pop(SEQ, 0)
        if not isinstance(self.seq, int):
            raise self._damaged(self.snapshot, f"{SEQ} is {self.seq!r}")
        if not self.log.exists():
            return state
        data = self.log.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):  # killed mid-append: that change did not happen
            os.truncate(self.log, complete)
        for number, line in enumerate(data[:complete].splitlines(), start=1):
            try:
                change = json.loads(line)
                seq = change.pop("seq")
                if not isinstance(seq, int):
                    raise TypeError(seq)
                if seq <= self.seq:
                    continue  # a compaction's snapshot includes it already
                if seq != self.seq + 1:
                    raise self._damaged(self.log, f"line {number} is change {seq}, after change {self.seq}")
                self.apply(state, change)
            except (ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError) as exc:
                raise self._damaged(self.log, f"line {number} is not a change") from exc
            self.seq = seq
        self._log_bytes = complete
        return state

    def append(self, change: Change) -> int:
        """Log one change (applied by the owner already); returns the bytes written."""
        line = (json.dumps({"seq": self.seq + 1, **change}) + "\n").encode()
        try:
            with open(self.log, "ab") as handle:
                handle.write(line)
                if self.durable:
                    handle.flush()
                    os.fsync(handle.fileno())
        except OSError:  # a full disk: no torn line left for the next append to follow
            if self.log.exists():
                os.truncate(self.log, self._log_bytes)
            raise
        self.seq += 1
        self._log_bytes += len(line)
        self.written += len(line)
        return len(line)

    def due(self) -> bool:
        """Whether the log has outgrown the snapshot (the next save should `compact`)."""
        return self._log_bytes > max(COMPACT_MIN_BYTES, COMPACT_RATIO * self._snapshot_bytes)

    def compact(self, state: dict[str, Any]) -> int:
        """Write `state` (every change logged so far applied, and any made since) as the new snapshot and remove the
        log; returns the bytes written. The snapshot's seq is the last line's: lines left by a crash before the log
        is removed are all skipped, and the next change is logged after it."""
        self._snapshot_bytes = write_snapshot(self.snapshot, {**state, SEQ: self.seq}, self.durable)
        self.log.unlink(missing_ok=True)  # a crash before this: its lines are skipped by their seq
        self._log_bytes = 0
        self.written += self._snapshot_bytes
        return self._snapshot_bytes

    def _damaged(self, path: Path, why: str) -> StateFileDamaged:
        return StateFileDamaged(f"{self.what} file {path} is damaged ({why}); move {self.snapshot.name} and "
                                f"{self.log.name} away to start afresh")


class ChangedKeys(dict):
    """A dict that remembers the keys set and removed since its last `take_changes()`, so that a save logs them
    without comparing the whole dict with its last saved copy (a court validator's open duties: one entry per
    verdict in the dispute window)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._put: set[Any] = set()
        self._gone: set[Any] = set()

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self._put.add(key)
        self._gone.discard(key)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._gone.add(key)
        self._put.discard(key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            self._gone.add(key)
            self._put.discard(key)
        return super().pop(key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        self._gone.update(self)
        self._put.clear()
        super().clear()

    def take_changes(self) -> tuple[dict[Any, Any], list[Any]]:
        """The entries set and the keys removed since the last call (`apply_diff`'s put and del), forgotten."""
        put, gone = {k: self[k] for k in self._put}, list(self._gone)
        self._put, self._gone = set(), set()
        return put, gone


def apply_diff(state: dict[str, Any], change: Change) -> None:
    """Apply a `diff`: top-level values set, dict entries put and keys deleted."""
    state.update(change.get("set", {}))
    for name, entries in change.get("put", {}).items():
        state.setdefault(name, {}).update(entries)
    for name, keys in change.get("del", {}).items():
        for key in keys:
            state.get(name, {}).pop(key, None)


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A copy deep enough for `diff`: each top-level dict copied."""
    return {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}


def diff(old: dict[str, Any], new: dict[str, Any]) -> Change | None:
    """What turns `old` into `new` (None: nothing): top-level values set, dict entries put and keys deleted.
    Comparing walks both in memory (C set operations on the dicts' views when the values are hashable): what is
    saved is the writing."""
    change: Change = {"set": {}, "put": {}, "del": {}}
    missing = object()
    for name, value in new.items():
        if name == SEQ:
            continue
        before = old.get(name, missing)
        if isinstance(value, dict) and isinstance(before, dict):
            if value == before:
                continue
            try:
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
