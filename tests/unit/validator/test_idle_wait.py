"""An idle validator between polls asks only for the head's number, at waits doubling from 0.1 s up to
`head_every_s`, and polls again at once when the head moves, or when a retry is due (at most every
`poll_interval_s`) — a stand-in chain on a fake clock counts the asks (issue 47)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from validator import daemon as daemon_module
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Stop:
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    def wait(self, seconds: float) -> bool:
        self.clock.now += seconds
        return False


class _Eth:
    def __init__(self, clock: _Clock, moves_at: float) -> None:
        self.clock, self.moves_at, self.asks = clock, moves_at, []

    @property
    def block_number(self) -> int:
        self.asks.append(round(self.clock.now, 3))
        return 8 if self.clock.now >= self.moves_at else 7


def _daemon(monkeypatch: pytest.MonkeyPatch, moves_at: float, retry_at: float = float("inf")):
    clock = _Clock()
    monkeypatch.setattr(daemon_module, "time", SimpleNamespace(monotonic=clock.monotonic, time=clock.monotonic))
    eth = _Eth(clock, moves_at)
    daemon = object.__new__(ValidatorDaemon)
    daemon.ledger = SimpleNamespace(w3=SimpleNamespace(eth=eth))
    daemon.config = DaemonConfig(1, Path("unused"), "unused", poll_interval_s=0.5, head_every_s=2.0)
    daemon.retries = SimpleNamespace(next_at=lambda: retry_at)
    return daemon, eth, _Stop(clock), clock


def test_an_idle_daemon_looks_at_the_head_at_doubling_waits_up_to_the_block_time(monkeypatch) -> None:
    daemon, eth, stop, clock = _daemon(monkeypatch, moves_at=10.0)
    daemon._wait_for_work(7, stop)
    assert eth.asks == [0.1, 0.3, 0.7, 1.5, 3.1, 5.1, 7.1, 9.1, 11.1]  # then once a block
    assert clock.now == 11.1


def test_a_due_retry_ends_the_wait_after_the_poll_interval(monkeypatch) -> None:
    daemon, eth, stop, clock = _daemon(monkeypatch, moves_at=float("inf"), retry_at=0.0)
    daemon._wait_for_work(7, stop)
    assert clock.now == pytest.approx(0.7) and eth.asks == [0.1, 0.3]


def test_a_read_that_fails_waits_then_returns(monkeypatch) -> None:
    daemon, eth, stop, clock = _daemon(monkeypatch, moves_at=0.0)
    type(eth).block_number = property(lambda self: (_ for _ in ()).throw(ConnectionError("down")))
    daemon._wait_for_work(7, stop)
    assert clock.now == pytest.approx(2.1)
