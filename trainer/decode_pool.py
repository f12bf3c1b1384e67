"""Rollout files decoded beside the trainer's main process: the same checks, in a pool of processes, in order.

At a thousand workers ~33 accepted files arrive a second, and decoding one (`protocol.rollouts.decode_rollouts`: parse
and validate hostile bytes) takes ~0.07 s of a core for 128 × 1,000 tokens, so the trainer's main process alone kept
up with ~15 a second (issue 46). A `RolloutDecoder` of `workers` ≥ 2 runs that same function in worker processes of a
'forkserver' context (the trainer holds torch and its threads, which a fork would copy mid-state): the file's bytes go
in, the validated `RolloutBatch` (plain lists and bytes, no tensors) comes back pickled. With `workers` 0 or 1 it decodes
in this process (tests, small runs). Either way `submit` returns a `Decoding` whose `result()` is the batch or raises
the `RolloutFileError` the in-process decode raises, word for word; callers submit and collect in their consumption
order, so order and exactly-once consumption stay theirs.

A file that kills its decoding process (a crash in the Parquet reader) breaks the pool as a whole: every file then in
flight is decoded again, alone, in a fresh pool, and the one that breaks that too is refused with a
`RolloutSchemaError` — the trainer never dies of a file.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from protocol.rollouts import RolloutBatch, RolloutSchemaError, decode_rollouts

Decode = Callable[[bytes], RolloutBatch]


def default_workers() -> int:
    """One decoding process per core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _serve(trainer_pid: int) -> None:
    """A decoding process's start: it ignores Ctrl-C (a terminal's reaches the whole process group; the trainer shuts
    its pool down itself) and ends with the trainer, also after a kill -9 (it would wait for work forever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(trainer_pid,), daemon=True).start()


def _exit_with(pid: int) -> None:
    try:
        select.select([os.pidfd_open(pid)], [], [])  # readable once `pid` has ended
    except (AttributeError, OSError):  # no pidfd here: look once a second
        while _alive(pid):
            time.sleep(1.0)
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Decoding:
    """One submitted file: `result()` is its batch, or raises the file's `RolloutFileError`."""

    def __init__(self, decoder: RolloutDecoder, data: bytes, future: Future, pool: int):
        self._decoder, self._data, self._future, self._pool = decoder, data, future, pool

    def result(self) -> RolloutBatch:
        try:
            return self._future.result()
        except BrokenProcessPool:  # this file, or another in flight, killed a decoding process
            return self._decoder.decode_alone(self._data, broken=self._pool)
        finally:
            self._data = b""


class RolloutDecoder:
    """Decodes rollout files with `decode` (a module-level function: it is pickled by name) in `workers` processes,
    or in this process when `workers` ≤ 1. The pool starts on the first `submit`."""

    def __init__(self, workers: int, decode: Decode = decode_rollouts):
        self.workers = workers
        self.decode = decode
        self.restarts = 0
        """Pools started again after a decoding process died."""
        self._pool: ProcessPoolExecutor | None = None

    @property
    def in_process(self) -> bool:
        return self.workers <= 1

    def submit(self, data: bytes) -> Decoding:
        future: Future = Future()
        if self.in_process:
            try:
                future.set_result(self.decode(data))
            except Exception as exc:  # noqa: BLE001 - handed to result(), as a pool's future would
                future.set_exception(exc)
        else:
            future = self._running().submit(self.decode, data)
        return Decoding(self, data, future, self.restarts)

    def decode_alone(self, data: bytes, broken: int) -> RolloutBatch:
        """After pool number `broken` broke: `data` again, alone in a fresh pool; refused if it breaks that one too."""
        if self.restarts == broken:
            self._restart()
        try:
            return self._running().submit(self.decode, data).result()
        except BrokenProcessPool:
            self._restart()
            raise RolloutSchemaError("the decoding process died reading this file") from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _running(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = get_context("forkserver")
            context.set_forkserver_preload(["__main__", __name__])  # imported once; each process forks from there
            self._pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_serve,
                                             initargs=(os.getpid(),))
        return self._pool

    def _restart(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            self.restarts += 1
