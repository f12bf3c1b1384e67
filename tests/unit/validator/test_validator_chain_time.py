"""The validator's clock (`validator.court_flow.ChainClock.now`): the latest block's timestamp, asked for at most every
CHAIN_TIME_TTL_S, never behind wall time (a devnet's block time lags it until a transaction is mined)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import validator.court_flow as court_flow
from validator.court_flow import ChainClock


def _clock(timestamps: list[int]) -> tuple[ChainClock, list[str]]:
    asked: list[str] = []

    def get_block(ident):
        asked.append(ident)
        return {"timestamp": timestamps[min(len(asked), len(timestamps)) - 1]}

    return ChainClock(SimpleNamespace(w3=SimpleNamespace(eth=SimpleNamespace(get_block=get_block)))), asked


def test_the_latest_block_is_asked_for_once_per_ttl(monkeypatch) -> None:
    ahead = int(time.time()) + 10_000  # a chain warped ahead of wall time
    clock, asked = _clock([ahead, ahead + 50])
    monkeypatch.setattr(court_flow, "CHAIN_TIME_TTL_S", 3600.0)
    assert clock.now() == ahead and clock.now() == ahead and asked == ["latest"]
    monkeypatch.setattr(court_flow, "CHAIN_TIME_TTL_S", 0.0)
    time.sleep(0.001)
    assert clock.now() == ahead + 50 and asked == ["latest", "latest"]  # expired: asked again


def test_a_chain_behind_wall_time_reads_as_wall_time() -> None:
    clock, _ = _clock([1_000])
    before = int(time.time())
    assert clock.now() >= before
