"""`TxSender`'s wait for a receipt: asked for at once, then half a block later, then once a block — not several times
a second — and TransactionFailed once `receipt_timeout` passes (a stand-in chain on a fake clock counts the asks)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from web3.exceptions import TransactionNotFound

from ledger_client.chain import tx
from ledger_client.chain.errors import TransactionFailed
from ledger_client.chain.tx import TxSender


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Eth:
    """Mines the transaction at `mined_at` on the fake clock."""

    chain_id = 31337

    def __init__(self, clock: _Clock, mined_at: float) -> None:
        self.clock, self.mined_at, self.asks = clock, mined_at, []

    def get_transaction_receipt(self, tx_hash: bytes) -> dict:
        self.asks.append(self.clock.now)
        if self.clock.now < self.mined_at:
            raise TransactionNotFound("not yet")
        return {"status": 1, "blockNumber": 5}


def _sender(monkeypatch: pytest.MonkeyPatch, mined_at: float, **kwargs) -> tuple[TxSender, _Eth]:
    clock = _Clock()
    monkeypatch.setattr(tx, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep))
    eth = _Eth(clock, mined_at)
    account = SimpleNamespace(address="0x" + "11" * 20)
    return TxSender(SimpleNamespace(eth=eth), account, **kwargs), eth


def test_a_devnet_that_mines_at_once_costs_one_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    sender, eth = _sender(monkeypatch, mined_at=0.0)
    assert sender._receipt(b"\x01", "f")["status"] == 1
    assert eth.asks == [0.0]


@pytest.mark.parametrize("mined_at, asks", [(0.4, 2), (1.0, 2), (1.9, 3), (3.0, 3), (5.5, 5)])
def test_a_pending_transaction_is_asked_for_once_a_block(monkeypatch: pytest.MonkeyPatch, mined_at: float,
                                                         asks: int) -> None:
    sender, eth = _sender(monkeypatch, mined_at=mined_at, receipt_every_s=2.0)
    sender._receipt(b"\x01", "f")
    assert eth.asks == [0.0, 1.0, 3.0, 5.0, 7.0][:asks]


def test_no_receipt_within_the_timeout_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    sender, eth = _sender(monkeypatch, mined_at=float("inf"), receipt_timeout=10.0, receipt_every_s=2.0)
    with pytest.raises(TransactionFailed, match="no receipt"):
        sender._receipt(b"\x01", "f")
    assert eth.asks == [0.0, 1.0, 3.0, 5.0, 7.0, 9.0]
