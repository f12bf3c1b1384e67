"""The trainer's demand note and the worker's pacing on it (protocol/demand.py, worker/pacing.py)."""

from __future__ import annotations

import math

from protocol.demand import DemandEstimate, DemandNote
from worker.pacing import FIRST_INTERVAL_S, STALL_INTERVALS, Pacer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_trainer_notes_files_per_step_from_the_informative_groups_of_the_files_it_took():
    estimate = DemandEstimate(groups_per_batch=8)
    assert estimate.note(buffered_groups=0) == {"files_per_step_needed": None, "buffered_files": None,
                                                "recent_workers": 0}
    estimate.file_taken(0, "0xa")  # nothing informative yet: every file is needed
    assert estimate.note(0)["files_per_step_needed"] is None
    for _ in range(200):
        for worker in ("0xa", "0xb"):
            estimate.file_taken(2, worker)
    note = estimate.note(buffered_groups=3)
    assert note == {"files_per_step_needed": 4.0, "buffered_files": 1.5, "recent_workers": 2}
    assert DemandNote.from_metrics({"step": 7, **note}) == DemandNote(4.0, 1.5, 2)


def test_a_missing_or_malformed_note_leaves_a_worker_unpaced():
    for metrics in (None, [], {"step": 1}, {"files_per_step_needed": None, "buffered_files": None, "recent_workers": 0},
                    {"files_per_step_needed": "x", "buffered_files": 1, "recent_workers": 1},
                    {"files_per_step_needed": -1, "buffered_files": 1, "recent_workers": 1},
                    {"files_per_step_needed": float("inf"), "buffered_files": 1, "recent_workers": 1},
                    {"files_per_step_needed": 3, "buffered_files": 1, "recent_workers": 0}):
        assert DemandNote.from_metrics(metrics) is None, metrics
    pacer = Pacer(async_level=2)
    pacer.latest_step(5)
    pacer.observe(5, None)
    assert pacer.quota() is None and pacer.may_generate()


def test_a_worker_makes_its_share_of_async_level_steps_less_what_the_trainer_holds():
    clock = _Clock()
    pacer = Pacer(async_level=2, clock=clock)
    pacer.latest_step(10)
    pacer.observe(10, DemandNote(files_per_step=3.0, buffered_files=1.5, workers=2))
    assert pacer.quota() == math.ceil((2 * 3.0 - 1.5) / 2) == 3
    for _ in range(3):
        assert pacer.may_generate()
        pacer.submitted()
    assert not pacer.may_generate()
    clock.now += 0.5
    pacer.latest_step(11)  # a new step: the count starts again, on the newest note known
    assert pacer.submitted_since_step == 0 and pacer.may_generate()
    pacer.observe(9, DemandNote(3.0, 0.0, 1))  # an older step's note does not replace a newer one
    assert pacer.note[0] == 10
    pacer.observe(11, DemandNote(3.0, 6.0, 1))  # the trainer holds two steps' worth: nothing more now
    assert pacer.quota() == 0 and not pacer.may_generate()


def test_a_trainer_that_publishes_no_step_gets_another_share_each_stall_so_the_pool_never_stops():
    clock = _Clock()
    pacer = Pacer(async_level=2, clock=clock)
    pacer.latest_step(1)
    pacer.observe(1, DemandNote(files_per_step=2.0, buffered_files=4.0, workers=1))
    assert pacer.quota() == 0
    clock.now += STALL_INTERVALS * FIRST_INTERVAL_S  # no second step yet: the first interval is assumed
    assert pacer.quota() == 2
    clock.now += 1.0
    pacer.latest_step(3)  # two steps in 4 s since step 1: 2 s a step
    assert pacer.interval_s == (STALL_INTERVALS * FIRST_INTERVAL_S + 1.0) / 2
    assert pacer.quota() == 0
    clock.now += STALL_INTERVALS * pacer.interval_s * 2
    assert pacer.quota() == 4
