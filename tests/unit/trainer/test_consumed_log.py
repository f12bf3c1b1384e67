"""The trainer's consumed log (issue 46, finding 3): each accepted submission is consumed exactly once across a
kill -9 — a checkpoint keeps only the log's count, a resume truncates the log back to it (so what was consumed after
the checkpoint is consumed again, once) and drops a torn last line; a log that cannot match its checkpoint is an
error, never guessed around. The ledger source's own path through it: tests/unit/trainer/test_ledger_source_court.py."""

from __future__ import annotations

import gc
import os

import pytest

from trainer.consumed_log import LINE, ConsumedLog, ConsumedLogError, FollowerLog, read_consumed


def wid(i: int) -> str:
    return f"0x{i:064x}"


def test_consumed_ids_are_appended_and_a_checkpoint_keeps_only_their_count(tmp_path):
    log = ConsumedLog(tmp_path / "consumed.log")
    log.add([wid(1), wid(2)])
    log.add([wid(3)])
    assert wid(2) in log and wid(4) not in log and len(log) == 3
    assert log.state() == {"consumed_log": {"entries": 3}}
    assert (tmp_path / "consumed.log").stat().st_size == 3 * LINE
    assert read_consumed(tmp_path / "consumed.log") == [wid(1), wid(2), wid(3)]
    assert not gc.is_tracked(log._ids)  # a full garbage collection never walks millions of ids


def test_a_resume_after_kill_drops_what_came_after_the_checkpoint_and_a_torn_line(tmp_path):
    path = tmp_path / "consumed.log"
    before = ConsumedLog(path)
    before.add([wid(1), wid(2)])
    checkpoint = before.state()
    before.add([wid(3)])  # consumed by a step the crash lost
    with open(path, "ab") as handle:  # killed mid-append: half a line
        handle.write(wid(4).encode()[:30])
    del before  # no close: the process died

    after = ConsumedLog(path)
    after.restore(checkpoint)
    assert sorted(after) == [wid(1), wid(2)] and path.stat().st_size == 2 * LINE
    after.add([wid(3), wid(4)])  # handed out again, once each
    assert read_consumed(path) == [wid(1), wid(2), wid(3), wid(4)]

    again = ConsumedLog(path)  # a second resume from the same checkpoint
    again.restore(checkpoint)
    assert sorted(again) == [wid(1), wid(2)]


def test_an_id_is_never_logged_twice(tmp_path):
    log = ConsumedLog(tmp_path / "consumed.log")
    log.add([wid(1)])
    with pytest.raises(ValueError, match="consumed already"):
        log.add([wid(1)])
    assert len(log) == 1 and read_consumed(tmp_path / "consumed.log") == [wid(1)]
    with pytest.raises(ValueError, match="twice in one batch"):  # two lines, one count: a resume would cut short
        log.add([wid(2), wid(2)])
    assert len(log) == 1 and read_consumed(tmp_path / "consumed.log") == [wid(1)]


def test_a_source_never_restored_starts_a_fresh_run(tmp_path):
    path = tmp_path / "consumed.log"
    ConsumedLog(path).add([wid(1)])
    fresh = ConsumedLog(path)  # no checkpoint to resume from: the cursors start over, so does the log
    assert wid(1) not in fresh and path.stat().st_size == 0


def test_a_log_shorter_than_its_checkpoint_or_not_work_ids_is_an_error(tmp_path):
    path = tmp_path / "consumed.log"
    log = ConsumedLog(path)
    log.add([wid(1)])
    with pytest.raises(ConsumedLogError, match="checkpoint counts 2"):
        ConsumedLog(path).restore({"consumed_log": {"entries": 2}})
    path.write_bytes(b"x" * (LINE - 1) + b"\n")  # a line's length, not a work id
    with pytest.raises(ConsumedLogError, match="not a log of work ids"):
        ConsumedLog(path).restore({"consumed_log": {"entries": 1}})


def test_an_old_checkpoint_list_becomes_the_log(tmp_path):
    path = tmp_path / "consumed.log"
    log = ConsumedLog(path)
    log.restore({"consumed": [wid(5), wid(6)]})  # a checkpoint written before the log
    assert read_consumed(path) == [wid(5), wid(6)] and log.state() == {"consumed_log": {"entries": 2}}


def test_in_memory_the_state_carries_the_ids(tmp_path):
    log = ConsumedLog()
    log.add([wid(1), wid(2)])
    state = log.state()
    assert state == {"consumed": [wid(1), wid(2)]}
    restarted = ConsumedLog()
    restarted.restore(state)
    assert sorted(restarted) == [wid(1), wid(2)]
    assert not os.listdir(tmp_path)


def test_a_follower_rank_restores_the_main_ranks_checkpoint_holding_no_ids(tmp_path):
    main = ConsumedLog(tmp_path / "consumed.log")
    main.add([wid(1), wid(2)])
    follower = FollowerLog()  # torchrun's other ranks: the checkpoint's count names ids only the main rank holds
    follower.restore(main.state())
    assert len(follower) == 0 and wid(1) not in follower
    with pytest.raises(RuntimeError, match="only the main rank"):
        follower.add([wid(3)])
