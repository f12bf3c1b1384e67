"""One look at the chain for a whole process: `ChainWatch` asks for the pool's state at most once per `every` seconds
(or the `max_age` a caller allows) whatever its threads ask. A worker's main loop and its prefetch thread each polled on
their own — `getPool` every 0.25 s, the block number every 0.1 s at `--max-pending`, 6–16 requests a second whatever it
did (issue 46); through one watch a worker reads the pool's state once per `worker.daemon.IDLE_LOOK_S`, busy or idle
(bench.worker_rpc, bench.scale)."""

from __future__ import annotations

import threading
import time
from typing import Callable

from web3 import Web3

from protocol.pool import PoolState

WATCH_EVERY_S = 2.0
"""How often a watch reads the pool's state unless told otherwise: once a 2 s block."""


class ChainWatch:
    """One pool's state, shared by the threads of a process (thread-safe)."""

    def __init__(self, w3: Web3, read_pool: Callable[[], PoolState], every: float = WATCH_EVERY_S):
        """`read_pool`: reads the pool's state (e.g. `lambda: pool_state(ledger, pool_id)`)."""
        self.w3 = w3
        self.read_pool = read_pool
        self.every = every
        self._lock = threading.Lock()
        self._pool: tuple[float, PoolState] | None = None

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
