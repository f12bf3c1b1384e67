"""The worker's journal as a log: each change is one appended line, a reopened journal holds what the last
change of each nonce said, a kill -9 in the middle of an append loses only that change, and an older worker's
journal (one JSON object, rewritten on every change) is read."""

from __future__ import annotations

import json

import pytest

from worker.journal import Journal, JournalCorrupt


def _submit(journal: Journal, nonce: int, step: int) -> None:
    journal.record(nonce, step, digest=f"{nonce:064x}", work_id=f"{nonce:064x}", file=f"/f/{nonce}", n_samples=8)
    journal.advance(nonce, "uploaded")
    journal.advance(nonce, "submitted")


def test_every_change_is_one_appended_line_and_a_reopened_journal_agrees(tmp_path):
    path = tmp_path / "journal.json"
    journal = Journal(path)
    for nonce in range(5):
        _submit(journal, nonce, step=nonce // 2)
    size = path.stat().st_size
    journal.advance(3, "submitted", final="accepted", submitted_at=7)
    line = path.read_bytes()[size:]
    assert line.count(b"\n") == 1 and json.loads(line)["final"] == "accepted"  # appended, nothing rewritten
    journal.drop(4)
    assert len(path.read_text().splitlines()) == 5 * 3 + 2

    again = Journal(path)
    assert again.entries() == journal.entries()
    assert [e["nonce"] for e in again.open_submissions()] == [0, 1, 2]
    assert [again.submitted_count(s) for s in range(3)] == [2, 2, 0]
    assert again.entries()[3]["submitted_at"] == 7
    assert len(path.read_text().splitlines()) == 4  # opening compacts the log to one line per entry


def test_a_change_cut_short_by_a_kill_is_the_only_one_lost(tmp_path):
    path = tmp_path / "journal.json"
    journal = Journal(path)
    _submit(journal, 0, step=0)
    journal.record(1, 0, digest="11" * 32, work_id="22" * 32, file="/f/1", n_samples=8)
    with open(path, "a") as log:
        log.write('{"nonce": 1, "step": 0, "stage": "uplo')  # the kill -9 came in the middle of this append
    again = Journal(path)
    assert [(e["nonce"], e["stage"]) for e in again.entries()] == [(0, "submitted"), (1, "written")]
    again.advance(1, "uploaded")
    assert Journal(path).entries()[1]["stage"] == "uploaded"


def test_a_damaged_line_is_refused_with_the_file_and_line(tmp_path):
    path = tmp_path / "journal.json"
    _submit(Journal(path), 0, step=0)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(JournalCorrupt, match=r"journal\.json: line 2 is not a journal line"):
        Journal(path)


def test_an_older_workers_journal_is_read(tmp_path):
    path = tmp_path / "journal.json"
    entry = {"nonce": 4, "step": 1, "stage": "submitted", "digest": "ab" * 32, "work_id": "cd" * 32, "file": "/f",
             "n_samples": 8, "final": None}
    path.write_text(json.dumps({"entries": {"4": entry}}, indent=1))
    journal = Journal(path)
    assert journal.entries() == [entry] and journal.open_submissions() == [entry] and journal.submitted_count(1) == 1
    assert [json.loads(line) for line in path.read_text().splitlines()] == [entry]
