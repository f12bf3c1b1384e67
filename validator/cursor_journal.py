"""A validator's event cursors saved by what changed, not rewritten whole at every poll.

An `EventCursor` keeps, besides its next block, the keys of the events it delivered within its reorg window (256
blocks): at a thousand workers 17k–34k events, a file of ~2.6 MB rewritten at every poll, which took 106–139 ms
(issue 46, finding 4). Here the cursor's file (`cursor.json`, the format `EventCursor` reads) is the snapshot of a
`validator.state_journal.StateJournal`, and each commit appends to `cursor.json.log` one line with what changed since
the last one (`state_journal.diff`: top-level values set, and per dict — the delivered events, the recorded block
hashes — the entries put and the keys deleted): O(events of the poll) written, nothing when nothing changed. Finding
the changes still walks the window in memory (C set operations on the dicts' views, about what serialising it cost;
the cursor's own prune walks it each poll too): what this saves is the writing. The log is compacted into a new
snapshot as the journal's other files are (amortised, still O(change)), and a kill -9 anywhere leaves the state of the
last complete commit (a torn last line's events are delivered again, as after a crash before a commit).
`prepare()`, before the cursor is made, folds the log into the snapshot, so `EventCursor` loads (and checks chain,
contract and events of) the latest state as it always did. Losing a commit costs only events seen again, so appends
are not fsynced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from validator.state_journal import SEQ, StateJournal, apply_diff, copy_state, diff, log_path

__all__ = ["CursorJournal", "log_path", "prepare"]


def _journal(snapshot: Path) -> StateJournal:
    return StateJournal(snapshot, "event cursor", apply_diff, durable=False)


def prepare(snapshot: Path) -> None:
    """Fold `snapshot`'s log, if any, into it (atomically), and remove the log: run before the cursor loads it."""
    journal = _journal(snapshot)
    if journal.log.exists():
        state = journal.load()
        if snapshot.exists():
            journal.compact(state)
        journal.log.unlink(missing_ok=True)


class CursorJournal:
    """Saves `state` (an `EventCursor.state`, made from `snapshot` after `prepare(snapshot)`) by appending changes."""

    def __init__(self, snapshot: Path, state: dict[str, Any]):
        self.snapshot = snapshot
        self.log = log_path(snapshot)
        self._journal = _journal(snapshot)
        self._journal.load()  # after prepare(): the snapshot alone, its size and seq
        self._saved = copy_state(state)

    def commit(self, state: dict[str, Any]) -> int:
        """Persist `state`: its changes since the last commit as one appended line (a new snapshot when the log has
        grown past it, or when there is none yet). Returns the bytes written."""
        if not self.snapshot.exists() or self._journal.due():
            return self._compact(state)
        change = diff(self._saved, state)
        if change is None:
            return 0
        written = self._journal.append(change)
        state[SEQ] = self._journal.seq
        self._saved = copy_state(state)
        return written

    def _compact(self, state: dict[str, Any]) -> int:
        state[SEQ] = self._journal.seq
        written = self._journal.compact(state)
        self._saved = copy_state(state)
        return written

    def saved(self) -> dict[str, Any]:
        """A copy of the state as last committed: what a cursor goes back to when a poll fails before its commit."""
        return copy_state(self._saved)

    def close(self) -> None:
        """Nothing held open (each append opens the log): kept for the daemon's orderly shutdown."""
