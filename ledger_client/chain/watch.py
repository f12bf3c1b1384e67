"""One look at the chain for a whole process: `ChainWatch` asks for the head's number, and for the pool's state, at
most once per `every` seconds (or the `max_age` a caller allows) whatever its threads ask. A worker's main loop and its prefetch
thread each polled on their own — `getPool` every 0.25 s, the block number every 0.1 s at `--max-pending`, 6–16
requests a second whatever it did (issue 46); through one watch an idle worker reads the pool's state once per `worker.daemon.IDLE_LOOK_S`, and nothing else (bench.worker_rpc)."""

from __future__ import annotations

import threading
import time
from typing import Callable

from web3 import Web3

from protocol.pool import PoolState

WATCH_EVERY_S = 2.0
"""How often a watch asks for the latest block unless told otherwise: one 2 s block."""


class ChainWatch:
    """The head's number and one pool's state, shared by the threads of a process (thread-safe)."""

    def __init__(self, w3: Web3, read_pool: Callable[[], PoolState], every: float = WATCH_EVERY_S):
        """`read_pool`: reads the pool's state (e.g. `lambda: pool_state(ledger, pool_id)`)."""
        self.w3 = w3
        self.read_pool = read_pool
        self.every = every
        self._lock = threading.Lock()
        self._head: tuple[float, int] | None = None
        self._pool: tuple[float, PoolState] | None = None

    def head(self, max_age: float | None = None) -> int:
        """The latest block's number as last read, read again (`eth_blockNumber`) when older than `max_age` seconds
        (default `every`): concurrent callers share one request."""
        max_age = self.every if max_age is None else max_age
        with self._lock:
            if self._head is None or time.monotonic() - self._head[0] >= max_age:
                self._head = (time.monotonic(), self.w3.eth.block_number)
            return self._head[1]

    def chain_time(self) -> int:
        """The latest block's timestamp (the contracts' clock), read now: ask only when a decision needs it."""
        return self.w3.eth.get_block("latest")["timestamp"]

    def pool(self, max_age: float | None = None) -> PoolState:
        """The pool's state as last read, read again when older than `max_age` seconds (default `every`):
        concurrent callers share one request."""
        max_age = self.every if max_age is None else max_age
        with self._lock:  # held while reading: threads that ask meanwhile take this read's answer
            if self._pool is None or time.monotonic() - self._pool[0] >= max_age:
                self._pool = (time.monotonic(), self.read_pool())
            return self._pool[1]

    def refresh(self) -> None:
        """Forget the last look: the next question reads the chain (after this process sent a transaction)."""
        with self._lock:
            self._head = None
            self._pool = None

    def wait_for_a_block(self, seen: int | None, stop: threading.Event, timeout: float,
                         every: float | None = None) -> None:
        """Return once the head is past `seen` (None: the head now), or after `timeout`, or on `stop`; looks every
        `every` seconds (default the watch's). A failed read waits out the timeout: the caller's next look reports
        a chain that is down."""
        every = self.every if every is None else every
        deadline = time.monotonic() + timeout
        try:
            if seen is None:
                seen = self.head(every)
            while not stop.wait(min(every, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline or self.head(every) != seen:
                    return
        except Exception:  # noqa: BLE001 - see the docstring
            stop.wait(max(0.0, deadline - time.monotonic()))
