"""A pool of N workers pacing on the trainer's demand note, simulated with the real `Pacer` (worker/pacing.py) and
the real `DemandEstimate` (protocol/demand.py): how many files the pool makes over what the trainer asks.

Shared by tests/unit/worker/test_pacing.py (≤ 1.5× at 10, 1,000 and 10,000 workers, with churn) and bench.scale
(`pacing_overproduction_1000`, `_10000`). Time is a fake clock: the simulation waits on nothing.
"""

from __future__ import annotations

import random

from protocol.demand import DemandEstimate, DemandNote
from worker.pacing import STALL_INTERVALS, Pacer


class Clock:
    """A clock the simulation moves by hand (a `Pacer`'s `clock`)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def simulate_pool(workers: int, steps: int, churn: float = 0.0, seed: int = 0, files_needed: int = 32,
                  async_level: int = 2, warmup: int = 10) -> tuple[float, float]:
    """A pool of `workers` fast workers, each pacing with the real `Pacer` on the real `DemandEstimate`'s note, and a
    trainer that takes every file into its buffer, drops groups older than the async level and trains a step on
    `files_needed` files (one informative group a file) once it holds them, waiting 1.5 intervals at a time while it
    does not. Each step `churn` of the workers leave and as many new ones join. Returns, after `warmup` steps, the
    files made over what the notes asked (Σ made / Σ (async_level · files_per_step − buffered_files)) and over the
    files the trainer trained on."""
    rng = random.Random(seed)
    clock, interval = Clock(), 30.0
    capacity = max(2, 4 * async_level * files_needed // workers)  # files a worker can make a step: faster than asked
    pacers: dict[int, Pacer] = {}
    joined = 0

    def join() -> None:
        nonlocal joined
        pacers[joined] = Pacer(async_level, clock=clock, rng=random.Random(rng.random()))
        joined += 1

    for _ in range(workers):
        join()
    estimate = DemandEstimate(groups_per_batch=files_needed)
    buffer: list[int] = []  # the policy step of each buffered group
    step, note = 0, None
    made = asked = trained = 0
    for step in range(1, steps + 1):
        for _ in range(max(1, round(churn * workers)) if churn else 0):
            del pacers[rng.choice(list(pacers))]
            join()
        made_now = 0
        for pacer in pacers.values():
            pacer.latest_step(step)
            pacer.observe(step, note)
        while True:  # the workers generate; the trainer trains when it holds a batch, else waits 1.5 intervals
            for worker, pacer in pacers.items():
                for _ in range(capacity):
                    if not pacer.may_generate():
                        break
                    pacer.submitted()
                    made_now += 1
                    buffer.append(step)
                    estimate.file_taken(1, f"0x{worker:x}")
            buffer = [s for s in buffer if s >= step + 1 - async_level]  # stale groups dropped
            if len(buffer) >= files_needed:
                break
            clock.now += STALL_INTERVALS * interval
        clock.now += interval
        del buffer[:files_needed]
        metrics = estimate.note(buffered_groups=len(buffer))
        if step > warmup:
            made += made_now
            trained += files_needed
            asked += max(0.0, async_level * note.files_per_step - note.buffered_files)
        note = DemandNote.from_metrics(metrics)
    return made / asked, made / trained
