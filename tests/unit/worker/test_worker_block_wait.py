"""A worker stopped at --max-pending waits for the next block (a verdict comes only with one), not a whole poll
interval: `WorkerDaemon._wait_for_a_block` (through the process's ChainWatch) on a stand-in chain whose block number
moves when the test says."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from ledger_client.chain.watch import ChainWatch
from worker.daemon import WorkerDaemon


class _Chain:
    """`ledger.w3.eth.block_number` that advances after `asks_until_block` questions."""

    def __init__(self, asks_until_block: int | None) -> None:
        self.asks, self.asks_until_block, self.number = 0, asks_until_block, 100

    @property
    def block_number(self) -> int:
        self.asks += 1
        if self.asks_until_block is not None and self.asks > self.asks_until_block:
            return self.number + 1
        return self.number


def _worker(chain: _Chain) -> WorkerDaemon:
    worker = WorkerDaemon.__new__(WorkerDaemon)  # only the chain watch is used by the wait
    worker.watch = ChainWatch(SimpleNamespace(eth=chain), read_pool=lambda: None, every=0.01)
    return worker


def test_the_wait_ends_at_the_first_new_block() -> None:
    chain = _Chain(asks_until_block=3)
    _worker(chain)._wait_for_a_block(threading.Event(), timeout=3600.0)  # would hang an hour if it missed it
    assert chain.asks == 4  # the number at the start, two unchanged, then the new block


def test_without_a_new_block_the_wait_ends_at_its_timeout_or_when_stopped() -> None:
    chain = _Chain(asks_until_block=None)
    _worker(chain)._wait_for_a_block(threading.Event(), timeout=0.05)
    assert chain.asks >= 1
    stop = threading.Event()
    stop.set()
    stopped = _Chain(asks_until_block=None)
    _worker(stopped)._wait_for_a_block(stop, timeout=3600.0)
    assert stopped.asks == 1


def test_a_chain_that_cannot_be_asked_is_waited_out_quietly() -> None:
    class Down:
        @property
        def block_number(self) -> int:
            raise ConnectionError("node down")

    worker = _worker(Down())
    worker._wait_for_a_block(threading.Event(), timeout=0.05)  # no exception: the main loop reports the chain
