"""The validator's clock (`ValidatorDaemon._now`): the latest block's timestamp, asked for at most every
CHAIN_TIME_TTL_S, never behind wall time (a devnet's block time lags it until a transaction is mined)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import validator.daemon as daemon_module
from validator.daemon import ValidatorDaemon


def _validator(timestamps: list[int]) -> tuple[ValidatorDaemon, list[str]]:
    asked: list[str] = []

    def get_block(ident):
        asked.append(ident)
        return {"timestamp": timestamps[min(len(asked), len(timestamps)) - 1]}

    validator = ValidatorDaemon.__new__(ValidatorDaemon)  # only the ledger and the clock's memory are used
    validator.ledger = SimpleNamespace(w3=SimpleNamespace(eth=SimpleNamespace(get_block=get_block)))
    validator._chain_time = None
    return validator, asked


def test_the_latest_block_is_asked_for_once_per_ttl(monkeypatch) -> None:
    ahead = int(time.time()) + 10_000  # a chain warped ahead of wall time
    validator, asked = _validator([ahead, ahead + 50])
    monkeypatch.setattr(daemon_module, "CHAIN_TIME_TTL_S", 3600.0)
    assert validator._now() == ahead and validator._now() == ahead and asked == ["latest"]
    monkeypatch.setattr(daemon_module, "CHAIN_TIME_TTL_S", 0.0)
    time.sleep(0.001)
    assert validator._now() == ahead + 50 and asked == ["latest", "latest"]  # expired: asked again


def test_a_chain_behind_wall_time_reads_as_wall_time() -> None:
    validator, _ = _validator([1_000])
    before = int(time.time())
    assert validator._now() >= before
