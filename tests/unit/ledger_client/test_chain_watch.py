"""`ChainWatch`: a process's threads share one look at the pool's state — read at most once per allowed age whatever
the threads ask (a stand-in chain counts the reads)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from ledger_client.chain.watch import ChainWatch


def _watch(every: float) -> tuple[ChainWatch, list[int]]:
    reads: list[int] = []
    return ChainWatch(SimpleNamespace(eth=None), lambda: reads.append(1) or SimpleNamespace(latest_step=len(reads)),
                      every), reads


def test_threads_asking_within_the_age_share_one_read() -> None:
    watch, reads = _watch(every=3600.0)
    threads = [threading.Thread(target=watch.pool) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reads) == 1
    assert watch.pool().latest_step == 1  # the state as read, not read again


def test_an_older_answer_than_allowed_is_read_again() -> None:
    watch, reads = _watch(every=3600.0)
    watch.pool()
    assert watch.pool(max_age=0.0).latest_step == 2 and len(reads) == 2
