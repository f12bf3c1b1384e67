"""The validator's event cursors are saved by what changed (validator/cursor_journal.py; issue 46, finding 4): a poll
with a handful of new events appends a line of their size, not the 34k events a thousand workers leave in the
cursor's reorg window; and a kill -9 anywhere — mid-append, or between a compaction's snapshot and its emptying of the
log — leaves the state of the last complete commit. The daemon's own restarts: tests/integration/test_validator_daemon.py."""

from __future__ import annotations

import json

import pytest

from ledger_client.chain.errors import LedgerError
from validator import state_journal
from validator.cursor_journal import CursorJournal, log_path, prepare


def cursor_state(events: int, next_block: int = 1_000) -> dict:
    """An EventCursor's state: its position, the block hashes and delivered events of its reorg window."""
    return {"chain_id": 31337, "address": "0xpool", "events": ["WorkSubmitted"], "next_block": next_block,
            "recorded": {str(b): f"0x{b:064x}" for b in range(next_block - 256, next_block)},
            "delivered": {f"0x{i:064x}:0": next_block - 1 - i % 256 for i in range(events)}}


def loaded(snapshot) -> dict:
    """What the daemon's next start loads: the log folded into the snapshot, then the snapshot read."""
    prepare(snapshot)
    return json.loads(snapshot.read_text())


def poll(state: dict, first: int, new: int) -> None:
    """A poll's changes: one more block, `new` events delivered, the oldest block pruned."""
    block = state["next_block"]
    state["next_block"] = block + 1
    state["recorded"][str(block)] = f"0x{block:064x}"
    del state["recorded"][str(block - 256)]
    for i in range(first, first + new):
        state["delivered"][f"0x{i:064x}:0"] = block


def test_a_poll_appends_its_changes_not_the_whole_window(tmp_path):
    snapshot = tmp_path / "cursor.json"
    state = cursor_state(events=34_000)
    journal = CursorJournal(snapshot, state)
    whole = journal.commit(state)  # no file yet: a snapshot
    assert whole == snapshot.stat().st_size > 2_000_000
    poll(state, first=34_000, new=66)
    written = journal.commit(state)
    assert 0 < written < 66 * 200 and log_path(snapshot).stat().st_size == written
    assert journal.commit(state) == 0  # nothing changed: nothing written
    journal.close()
    assert loaded(snapshot) == state and not log_path(snapshot).exists()


def test_the_log_is_folded_into_a_new_snapshot_once_it_outgrows_the_old(tmp_path, monkeypatch):
    monkeypatch.setattr(state_journal, "COMPACT_MIN_BYTES", 0)
    snapshot = tmp_path / "cursor.json"
    state = cursor_state(events=10)
    journal = CursorJournal(snapshot, state)
    journal.commit(state)
    sizes = []
    for n in range(200):
        poll(state, first=10 + 10 * n, new=10)
        journal.commit(state)
        log = log_path(snapshot)
        sizes.append(log.stat().st_size if log.exists() else 0)
    assert 0 in sizes[1:]  # compacted at least once (the log removed)
    assert max(sizes) <= (state_journal.COMPACT_RATIO + 1) * snapshot.stat().st_size
    journal.close()
    assert loaded(snapshot) == state


def test_a_torn_last_line_is_a_commit_that_did_not_happen(tmp_path):
    snapshot = tmp_path / "cursor.json"
    state = cursor_state(events=100)
    journal = CursorJournal(snapshot, state)
    journal.commit(state)
    poll(state, first=100, new=5)
    journal.commit(state)
    committed = json.loads(json.dumps(state))
    poll(state, first=105, new=5)
    journal.commit(state)
    log = log_path(snapshot)
    log.write_bytes(log.read_bytes()[:-20])  # killed mid-append
    assert loaded(snapshot) == committed  # its events are delivered again, as after a crash before a commit


def test_lines_a_compaction_left_behind_its_snapshot_are_skipped(tmp_path):
    snapshot = tmp_path / "cursor.json"
    state = cursor_state(events=100)
    journal = CursorJournal(snapshot, state)
    journal.commit(state)
    poll(state, first=100, new=5)
    journal.commit(state)
    stale_lines = log_path(snapshot).read_bytes()
    poll(state, first=105, new=5)
    journal._compact(state)  # the new snapshot is written ...
    log_path(snapshot).write_bytes(stale_lines)  # ... and the process killed before the log was emptied
    assert loaded(snapshot) == state


def test_a_cursor_file_written_before_the_log_is_read_as_it_was(tmp_path):
    snapshot = tmp_path / "cursor.json"
    old = cursor_state(events=3)
    snapshot.write_text(json.dumps(old))  # EventCursor.commit's whole file, no journal_seq
    assert loaded(snapshot) == old
    journal = CursorJournal(snapshot, old)
    poll(old, first=3, new=1)
    assert 0 < journal.commit(old) < 1_000
    journal.close()
    assert loaded(snapshot) == old


def test_a_damaged_snapshot_with_a_log_is_one_error_naming_the_file(tmp_path):
    snapshot = tmp_path / "cursor.json"
    snapshot.write_text("{not json")
    log_path(snapshot).write_text('{"seq": 1, "set": {}, "put": {}, "del": {}}\n')
    with pytest.raises(LedgerError, match="cursor.json is damaged"):
        prepare(snapshot)
