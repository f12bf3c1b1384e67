"""A validator's state files grow by appended changes, not whole rewrites (validator/state_journal.py; issue 46):
the court's duties (court.json) and the per-worker margin book (worker_margins.json) each write O(a change) per
save, however long the pool's history; a restart — after a kill -9 anywhere, a torn last line, a compaction cut
short — resumes with every saved change exactly once; a damaged file is refused with one error naming it; and a
file written whole before the log is read as it was."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from proofs.margins import FACTOR_VERSION, MarginNull
from validator import state_journal
from validator.court import CourtDuties, DutyBook, Vote
from validator.state_journal import StateFileDamaged, StateJournal, apply_diff, log_path
from validator.worker_margins import WorkerMargins

WORKER = "0x" + "ab" * 20
NULL = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6)
NEVER = 1e-300
"""A worker false-positive rate no e-value here reaches: every file stays open."""


def journal_of(path: Path) -> StateJournal:
    return StateJournal(path, "test state", apply_diff)


def test_a_change_appends_one_line_and_a_restart_replays_it(tmp_path):
    path = tmp_path / "state.json"
    journal = journal_of(path)
    assert journal.load() == {}
    journal.append({"put": {"a": {"x": 1}}})
    journal.append({"del": {"a": ["x"]}, "set": {"n": 2}})
    assert not path.exists() and len(log_path(path).read_text().splitlines()) == 2
    again = journal_of(path)
    assert again.load() == {"a": {}, "n": 2} and again.seq == 2


def test_a_torn_last_line_is_a_change_that_did_not_happen_and_is_cut_off(tmp_path):
    path = tmp_path / "state.json"
    journal = journal_of(path)
    journal.load()
    journal.append({"set": {"n": 1}})
    journal.append({"set": {"n": 2}})
    log = log_path(path)
    log.write_bytes(log.read_bytes()[:-5])  # killed mid-append
    again = journal_of(path)
    assert again.load() == {"n": 1}
    again.append({"set": {"n": 3}})  # logged after the cut, as change 2
    assert journal_of(path).load() == {"n": 3}


def test_lines_a_compaction_left_behind_its_snapshot_are_skipped(tmp_path):
    path = tmp_path / "state.json"
    journal = journal_of(path)
    journal.load()
    journal.append({"put": {"seen": {"a": 1}}})
    stale = log_path(path).read_bytes()
    journal.compact({"seen": {"a": 1, "b": 2}})  # the snapshot includes a change not logged yet
    log_path(path).write_bytes(stale)  # killed before the log was removed
    again = journal_of(path)
    assert again.load() == {"seen": {"a": 1, "b": 2}}
    again.append({"put": {"seen": {"c": 3}}})
    assert journal_of(path).load() == {"seen": {"a": 1, "b": 2, "c": 3}}


@pytest.mark.parametrize("snapshot, log, why", [
    ("{not json", "", "state.json is damaged \\(not JSON"),
    ("[1, 2]", "", "state.json is damaged \\(not a JSON object"),
    ("{}", '{"seq": 1, "set": {}}\nnot a line\n{"seq": 3}\n', "state.json.log is damaged \\(line 2 is not a change"),
    ("{}", '{"seq": 1, "set": {}}\n{"seq": 3, "set": {}}\n', "line 2 is change 3, after change 1"),
    ("{}", '{"seq": "1", "set": {}}\n', "line 1 is not a change"),
    ('{"journal_seq": "x"}', "", "journal_seq is 'x'"),
])
def test_a_damaged_file_is_one_error_naming_it(tmp_path, snapshot, log, why):
    path = tmp_path / "state.json"
    path.write_text(snapshot)
    if log:
        log_path(path).write_text(log)
    with pytest.raises(StateFileDamaged, match=why):
        journal_of(path).load()


# ---------------------------------------------------------------- the court's duties (court.json)


def test_a_court_save_appends_what_changed_not_every_open_duty(tmp_path):
    path = tmp_path / "court.json"
    duties = CourtDuties(path)
    for i in range(5_000):  # a long history of verdicts waiting for their window
        duties.book.finalize[f"{i:064x}"] = 1_000 + i
    duties.save()
    duties.journal.compact(duties.state())
    whole = path.stat().st_size
    duties.book.finalize.pop(f"{0:064x}")
    duties.book.draw[f"{1:064x}"] = 77
    duties.count("disputes")
    written = duties.save()
    assert 0 < written < 400 < whole // 100
    assert duties.save() == 0  # nothing changed: nothing written
    vote = duties.new_vote(bytes(32), valid=False, reveal_after=5, resolve_after=9)
    vote.committed = True
    duties.save()
    again = CourtDuties(path)
    assert again.book == duties.book and again.book.votes["00" * 32] == vote


def test_a_court_json_written_whole_before_the_log_is_read_and_kept(tmp_path):
    path = tmp_path / "court.json"
    old = DutyBook(finalize={"aa": 5}, votes={"bb": Vote(valid=True, salt="cc", reveal_after=1, resolve_after=2)})
    path.write_text(json.dumps(asdict(old)))  # what CourtDuties.save wrote before the log
    duties = CourtDuties(path)
    assert duties.book == old
    duties.book.finalize["dd"] = 6
    duties.save()
    assert json.loads(path.read_text()) == asdict(old)  # the old file is the snapshot, untouched
    assert CourtDuties(path).book.finalize == {"aa": 5, "dd": 6}


def test_the_court_log_is_compacted_once_it_outgrows_the_book(tmp_path, monkeypatch):
    monkeypatch.setattr(state_journal, "COMPACT_MIN_BYTES", 0)
    path = tmp_path / "court.json"
    duties = CourtDuties(path)
    sizes = []
    for i in range(300):
        duties.book.finalize[f"{i:064x}"] = i
        duties.book.finalize.pop(f"{i - 20:064x}", None)  # duties done: the book stays ~20 long
        duties.save()
        sizes.append(log_path(path).stat().st_size if log_path(path).exists() else 0)
    assert sizes.count(0) > 1
    assert max(sizes) <= (state_journal.COMPACT_RATIO + 1) * path.stat().st_size + 200
    assert CourtDuties(path).book == duties.book


# ---------------------------------------------------------------- the worker margin book (worker_margins.json)


def test_a_judgement_appends_one_file_however_many_the_book_holds(tmp_path):
    path = tmp_path / "worker_margins.json"
    book = WorkerMargins(path)
    sizes = []
    for k in range(400):
        assert book.judge(WORKER, f"0x{k:064x}", [2048], 0.0, NULL, NEVER) is None
        sizes.append(log_path(path).stat().st_size)
    lines = [b - a for a, b in zip(sizes, sizes[1:])]
    assert max(lines) < 600 and max(lines) - min(lines) <= 2  # one line each (its seq a digit or two longer)
    before = log_path(path).stat().st_size
    book.judge(WORKER, f"0x{7:064x}", [2048], 0.0, NULL, NEVER)  # judged again: counted once, nothing written
    assert log_path(path).stat().st_size == before
    assert WorkerMargins(path).workers == book.workers


def test_a_challenge_and_the_files_it_spent_come_back_after_a_restart_and_a_compaction(tmp_path, monkeypatch):
    monkeypatch.setattr(state_journal, "COMPACT_MIN_BYTES", 2_000)
    path = tmp_path / "worker_margins.json"
    book, challenges = WorkerMargins(path), {}
    for k in range(200):
        evidence = book.judge(WORKER, f"0x{k:02x}", [2048], 1.0, NULL, 1e-6)
        if evidence is not None:
            challenges[f"0x{k:02x}"] = evidence
    assert len(challenges) >= 2 and path.exists()  # compacted at least once
    after = WorkerMargins(path)
    assert after.workers == book.workers
    for work_id, evidence in challenges.items():
        assert after.judge(WORKER, work_id, [2048], 1.0, NULL, 1e-6) == evidence


def test_a_damaged_margin_line_is_one_error_not_a_traceback(tmp_path):
    path = tmp_path / "worker_margins.json"
    log_path(path).write_text('{"seq": 1, "file": [1, 0.0, []]}\n')  # no worker
    with pytest.raises(StateFileDamaged, match="worker margins file .*worker_margins.json.log is damaged"):
        WorkerMargins(path)


def test_a_worker_margins_json_written_whole_before_the_log_is_read_and_kept(tmp_path):
    path = tmp_path / "worker_margins.json"
    old = {WORKER: {"open": {"0x01": [2048, 0.5]}, "challenged": {"0x00": {"files": 3}}}}
    path.write_text(json.dumps(old))
    book = WorkerMargins(path)
    assert book.workers == {WORKER: old[WORKER] | {"factors": FACTOR_VERSION}}  # its files' factors: recounted
    assert book.judge(WORKER, "0x00", [1], 0.0, NULL, NEVER) == {"files": 3}
    book.judge(WORKER, "0x02", [2048], 0.5, NULL, NEVER)
    assert json.loads(path.read_text()) == old
    assert set(WorkerMargins(path).workers[WORKER]["open"]) == {"0x01", "0x02"}


JUDGE_FOREVER = """
import sys
from pathlib import Path
from proofs.margins import MarginNull
from validator import state_journal
from validator.worker_margins import WorkerMargins
state_journal.COMPACT_MIN_BYTES = 4_000
null = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6)
book = WorkerMargins(Path(sys.argv[1]))
for k in range(10**9):
    evidence = book.judge("0x" + "ab" * 20, f"0x{k:064x}", [2048], 1.0, null, 1e-6)
    print(k, "challenged" if evidence else "open", flush=True)
"""


def test_a_kill_9_mid_judgement_loses_no_file_and_counts_none_twice(tmp_path):
    """A validator judging (and compacting) as fast as it can, killed -9 after its 300th verdict: the book it comes
    back to holds every file whose verdict was reported, and at most the one being judged besides."""
    path = tmp_path / "worker_margins.json"
    child = subprocess.Popen([sys.executable, "-c", JUDGE_FOREVER, str(path)], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[3])
    assert child.stdout is not None
    reported = [child.stdout.readline().split() for _ in range(300)]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert [int(k) for k, _ in reported] == list(range(300))
    book = WorkerMargins(path).workers[WORKER]
    challenged = sorted(int(w, 16) for w in book["challenged"])
    assert {int(k) for k, outcome in reported if outcome == "challenged"} == set(challenged) - {300}
    counted = sum(e["files"] for e in book["challenged"].values()) + len(book["open"])
    assert counted in (300, 301)  # the 301st: logged, killed before its verdict was reported
    assert [book["challenged"][f"0x{c:064x}"]["files"] for c in challenged] == [
        c - before for c, before in zip(challenged, [-1, *challenged])]  # each file counted in one challenge
    assert {int(w, 16) for w in book["open"]} == set(range(challenged[-1] + 1, counted))
