"""`ChainWatch`: a process's threads share one look at the chain — the head and the pool's state are read at most once
per allowed age whatever the threads ask (a stand-in chain counts the questions)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from ledger_client.chain.watch import ChainWatch


class _Eth:
    def __init__(self) -> None:
        self.asks, self.number = 0, 7

    @property
    def block_number(self) -> int:
        self.asks += 1
        return self.number


def _watch(every: float) -> tuple[ChainWatch, _Eth, list[int]]:
    eth, reads = _Eth(), []
    return ChainWatch(SimpleNamespace(eth=eth), lambda: reads.append(1) or SimpleNamespace(latest_step=len(reads)),
                      every), eth, reads


def test_threads_asking_within_the_age_share_one_read() -> None:
    watch, eth, reads = _watch(every=3600.0)
    threads = [threading.Thread(target=lambda: (watch.head(), watch.pool())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert eth.asks == 1 and len(reads) == 1
    assert watch.pool().latest_step == 1  # the state as read, not read again


def test_an_older_answer_than_allowed_is_read_again() -> None:
    watch, eth, reads = _watch(every=3600.0)
    watch.head(), watch.pool()
    eth.number = 8
    assert watch.head(max_age=0.0) == 8 and eth.asks == 2
    assert watch.pool(max_age=0.0).latest_step == 2
    watch.refresh()
    assert watch.head() == 8 and eth.asks == 3  # forgotten: read again at once
