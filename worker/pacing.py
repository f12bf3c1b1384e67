"""Pacing a worker on the trainer's demand note (protocol/demand.py), as the local worker paces on its trainer.

The rule (the local worker's, worker/local_cli.py): generate while what waits for the trainer stays under
`async_level` steps' worth of files — here the files the trainer said it holds after the newest step, plus the files
this worker submitted since it saw that step, against its share of `async_level × files_per_step`. A trainer that
took fewer informative groups than its note foresaw waits for files and publishes no new step: after 1.5 step
intervals without one the worker makes another share of a step, and so on (from the seventeenth such stall on, twice
what the stalls added before), so a wrong note slows a step, never stops the pool. Without a note (a trainer that publishes no metrics, or none yet) a worker generates as fast as it
can.

A share is a fraction of a file when the pool has more workers than a step needs files: it is rounded at random,
`⌊share + u⌋` with one uniform `u` drawn at each new step, so each worker's expected files equal its share exactly and
the pool's equal what the trainer asks, at 10 workers or 10,000 (rounding every share up to a file made a pool of
N workers send N files a step whatever the trainer asked).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable

from protocol.demand import DemandNote

PACE_POLL_S = 0.2
"""How often a paced worker looks at the chain for a new step."""
STALL_INTERVALS = 1.5
"""Step intervals without a new step after which a paced worker makes another share of a step."""
LINEAR_STALLS = 16
"""Stalls that each add one share of a step; every later one doubles what the stalls add, so a note that counts far
more workers than there are (a hostile or broken trainer's: shares of 2^-64 files) is overcome within 76 stalls: it
slows a step, never stops the pool. Honest pools stall fewer times a step (10,000 workers with 2 % churn in the
pacing simulation, tests/unit/worker/test_pacing.py): doubling sooner made them overproduce there."""
FIRST_INTERVAL_S = 2.0
"""The step interval assumed before two steps were seen."""
INTERVAL_EMA = 0.2


class Pacer:
    """Whether this worker should generate another file now (`may_generate`); thread-safe."""

    def __init__(self, async_level: int, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.async_level = max(1, async_level)
        self.clock = clock
        self.rng = rng or random.Random()
        self.rounding = self.rng.random()
        """This step's `u` (module docstring): drawn again at each new step, fixed within it."""
        self.note: tuple[int, DemandNote] | None = None
        self.step = -1
        self.step_seen_at: float | None = None
        self.submitted_since_step = 0
        self.interval_s: float | None = None
        self._lock = threading.Lock()

    def observe(self, step: int, note: DemandNote | None) -> None:
        """The demand note published with `step`'s policy (None: that policy carried none)."""
        with self._lock:
            if self.note is None or step >= self.note[0]:
                self.note = None if note is None else (step, note)

    def latest_step(self, step: int) -> None:
        """The pool's latest step, as the main loop just read it."""
        with self._lock:
            if step <= self.step:
                return
            now = self.clock()
            if self.step_seen_at is not None and self.step >= 0:
                took = (now - self.step_seen_at) / (step - self.step)
                self.interval_s = took if self.interval_s is None else self.interval_s + INTERVAL_EMA * (took - self.interval_s)
            self.step, self.step_seen_at, self.submitted_since_step = step, now, 0
            self.rounding = self.rng.random()

    def submitted(self) -> None:
        with self._lock:
            self.submitted_since_step += 1

    def quota(self) -> int | None:
        """Files this worker may submit before the next step (None: unpaced), stalls included."""
        with self._lock:
            if self.note is None or self.step_seen_at is None:
                return None
            note = self.note[1]
            share = max(0.0, self.async_level * note.files_per_step - note.buffered_files) / note.workers
            stalls = math.floor((self.clock() - self.step_seen_at) / (STALL_INTERVALS * (self.interval_s or FIRST_INTERVAL_S)))
            growth = stalls if stalls <= LINEAR_STALLS else LINEAR_STALLS * 2 ** min(stalls - LINEAR_STALLS, 200)
            return math.floor(share + growth * note.files_per_step / note.workers + self.rounding)

    def may_generate(self) -> bool:
        quota = self.quota()
        return quota is None or self.submitted_since_step < quota
