"""The demo's adversary paces its files (adversaries/workers.py --min-interval): a minority of the work."""

from __future__ import annotations

import threading

from adversaries import workers


class Clock:
    """A fake monotonic clock that a stop event's wait advances (no real sleeping)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now


class RecordingStop(threading.Event):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.waits.append(timeout)
        self.clock.now += timeout or 0.0
        return self.is_set()


def test_the_adversary_starts_a_file_at_most_once_every_min_interval(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(workers.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(workers, "attack_file", lambda name, policy, spec, binding: (name, b"file", 1))
    produce = workers.cycling(["a", "b"], min_interval_s=6.0, stop=RecordingStop(clock))
    produce(None, None, None)  # the first file at once
    clock.now += 2.0  # it took 2 s to make and submit
    produce(None, None, None)
    clock.now += 7.0  # slower than the interval: no wait
    produce(None, None, None)
    assert clock.waits == [0.0, 4.0, 0.0]
    assert produce.used == ["a", "b", "a"]


def test_without_an_interval_the_adversary_never_waits(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(workers.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(workers, "attack_file", lambda name, policy, spec, binding: (name, b"file", 1))
    produce = workers.cycling(["a"], stop=RecordingStop(clock))
    for _ in range(3):
        produce(None, None, None)
    assert clock.waits == [0.0, 0.0, 0.0]


def test_a_negative_interval_is_refused_in_one_line(capsys):
    assert workers.main(["--attack", "withheld", "--pool", "1", "--min-interval", "-1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --min-interval must be >= 0, got -1"]
