"""The trainer's demand note and the worker's pacing on it (protocol/demand.py, worker/pacing.py)."""

from __future__ import annotations

import math
import random

import pytest

from bench.pacing import simulate_pool
from protocol.demand import DemandEstimate, DemandNote
from worker.pacing import FIRST_INTERVAL_S, STALL_INTERVALS, Pacer


class _Draws(random.Random):
    """A worker's random rounding, fixed: every `u` is `value`."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


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
                    {"files_per_step_needed": 3, "buffered_files": 1, "recent_workers": 0},
                    {"files_per_step_needed": 3, "buffered_files": 1, "recent_workers": 10**400},
                    {"files_per_step_needed": 3, "buffered_files": 1, "recent_workers": float("inf")},
                    {"files_per_step_needed": 1e308, "buffered_files": 1, "recent_workers": 1},
                    {"files_per_step_needed": 3, "buffered_files": float("nan"), "recent_workers": 1},
                    {"files_per_step_needed": 3, "buffered_files": 1, "recent_workers": 2**32 + 1}):
        assert DemandNote.from_metrics(metrics) is None, metrics
    pacer = Pacer(async_level=2)
    pacer.latest_step(5)
    pacer.observe(5, None)
    assert pacer.quota() is None and pacer.may_generate()


def test_a_worker_makes_its_share_of_async_level_steps_less_what_the_trainer_holds():
    clock = _Clock()
    pacer = Pacer(async_level=2, clock=clock, rng=_Draws(0.9))
    pacer.latest_step(10)
    pacer.observe(10, DemandNote(files_per_step=3.0, buffered_files=1.5, workers=2))
    assert pacer.quota() == math.floor((2 * 3.0 - 1.5) / 2 + 0.9) == 3
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
    pacer = Pacer(async_level=2, clock=clock, rng=_Draws(0.9))
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



def test_a_note_counting_far_more_workers_than_there_are_slows_the_pool_but_never_stops_it():
    """A hostile or broken trainer's note (2^32 workers and 2^-32 files a step: shares of 2^-64 files) still lets a
    worker make a file after finitely many stall intervals without a step: from the seventeenth, each doubles the
    shares the stalls add."""
    clock = _Clock()
    pacer = Pacer(async_level=2, clock=clock, rng=_Draws(0.0))
    pacer.latest_step(1)
    pacer.observe(1, DemandNote.from_metrics({"files_per_step_needed": 2**-32, "buffered_files": 0,
                                              "recent_workers": 2**32}))
    stalls = 0
    while pacer.quota() == 0:
        clock.now += STALL_INTERVALS * FIRST_INTERVAL_S
        stalls += 1
    assert pacer.quota() >= 1 and pacer.may_generate() and stalls == 76  # 16 · 2^(s − 16) · 2^-64 ≥ 1


def test_a_share_below_a_file_is_a_chance_of_one_file_drawn_each_step():
    pacer = Pacer(async_level=2, clock=_Clock(), rng=random.Random(7))
    pacer.latest_step(1)
    pacer.observe(1, DemandNote(files_per_step=32.0, buffered_files=0.0, workers=256))  # a share of 0.25 a step
    quotas = []
    for step in range(2, 4002):
        quotas.append(pacer.quota())
        assert pacer.quota() == quotas[-1]  # one draw a step: asking again does not reroll
        pacer.latest_step(step)
    assert set(quotas) == {0, 1} and abs(sum(quotas) / len(quotas) - 0.25) < 0.02


@pytest.mark.parametrize("workers", [10, 1_000, 10_000])
@pytest.mark.parametrize("churn", [0.0, 0.02])
def test_the_pool_makes_about_what_the_trainer_asks_at_any_population(workers, churn):
    """Issue 46: the note counted at most 64 workers and every share rounded up to a file, so 1,000 workers made 15.6×
    what a 32-file step asked. Now the count is uncapped and a fraction of a file is a chance of one."""
    over_asked, over_trained = simulate_pool(workers, steps=40, churn=churn, seed=workers)
    assert over_asked <= 1.5 and over_trained <= 1.5, (over_asked, over_trained)


def test_the_count_of_recent_workers_is_not_capped_and_forgets_workers_that_left():
    estimate = DemandEstimate(groups_per_batch=32)
    for _ in range(3):
        for worker in range(1_000):
            estimate.file_taken(1, f"0x{worker:x}")
    assert estimate.note(0)["recent_workers"] == 1_000  # was at most 64
    for i in range(3_000):  # 900 of them left: once the window of 3,000 files holds only the others' files
        estimate.file_taken(1, f"0x{i % 100:x}")
    assert estimate.note(0)["recent_workers"] == 100
