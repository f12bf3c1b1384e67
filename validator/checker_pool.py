"""Checker processes that a hostile file can kill or hang without taking the validator with it.

Each slot is one spawned process running one check at a time, so a crash or a timeout is
charged to exactly the file that caused it (a `ProcessPoolExecutor` breaks as a whole and
cannot stop one running task). A slot whose process died or overran its deadline is killed
and started afresh on its next use.
"""

from __future__ import annotations

import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from typing import Any

INFRASTRUCTURE_ERRORS = ("LedgerError", "KuboError", "CheckpointError", "ConnectionError", "TimeoutError")
"""Exception classes (by name, anywhere in the MRO) that are the validator's or the network's
fault, never the file's: a check that raised one is retried without counting against the file."""


class CheckerUnavailable(Exception):
    """A checker process could not be started (its checker factory failed)."""


@dataclass(frozen=True)
class CheckFailure:
    """A check that ended without an outcome."""

    kind: str
    """"crash" (the process died), "timeout" (killed at its deadline), "error" (the check raised;
    `infrastructure` says whether the exception was the network's), "unavailable" (no checker
    process could start) or, from the daemon's fetch, "unfetchable"."""
    message: str
    infrastructure: bool = False
    trace: str = ""


@contextmanager
def _ctrl_c_ignored() -> Iterator[None]:
    """Processes started inside ignore Ctrl-C from their first instruction on: a terminal sends SIGINT to the
    daemon's whole process group, and the daemon stops its checkers itself (they printed a KeyboardInterrupt
    traceback each). Only the main thread can change a signal's handler; a restart from another thread starts a
    checker that ignores SIGINT once `_serve` runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _serve(conn: Connection, factory: Callable[[], Any]) -> None:
    """Child process: build the checker, then answer ("ok", outcome) or ("error", ...) per job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon stops its checkers (see _ctrl_c_ignored)
    try:
        checker = factory()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        conn.send(("init-error", f"{exc.__class__.__name__}: {exc}"))
        return
    conn.send(("ready",))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        submission, data = job
        t0 = time.perf_counter()
        try:
            outcome = checker.check(submission, data)
            outcome.seconds = time.perf_counter() - t0
            conn.send(("ok", outcome))
        except Exception as exc:  # noqa: BLE001 - any failure is reported, the process lives on
            names = {c.__name__ for c in type(exc).__mro__}
            conn.send(("error", f"{exc.__class__.__name__}: {exc}", bool(names & set(INFRASTRUCTURE_ERRORS)),
                       traceback.format_exc(limit=8)))


@dataclass
class _Slot:
    process: Any
    conn: Connection
    job: Any = None
    deadline: float = 0.0


@dataclass
class CheckerPool:
    """`processes` checker processes; `submit` a job to a free slot, `wait` for finished ones."""

    factory: Callable[[], Any]
    processes: int = 1
    check_timeout_s: float = 300.0
    start_timeout_s: float = 300.0
    restarts: int = 0
    _slots: list[_Slot | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ctx = get_context("spawn")
        self._slots = [None] * self.processes

    def start(self) -> None:
        """Start every checker process now (they start on first use otherwise); raises CheckerUnavailable."""
        for index, slot in enumerate(self._slots):
            if slot is None:
                self._slots[index] = self._start()

    def free(self) -> bool:
        return any(s is None or s.job is None for s in self._slots)

    def busy(self) -> int:
        return sum(1 for s in self._slots if s is not None and s.job is not None)

    def submit(self, key: Any, submission: Any, data: bytes) -> CheckFailure | None:
        """Start checking `data` on a free slot (raises if none is free); a CheckFailure if no
        checker process could be started for it."""
        index = next(i for i, s in enumerate(self._slots) if s is None or s.job is None)
        slot = self._slots[index]
        if slot is None:
            try:
                slot = self._slots[index] = self._start()
            except CheckerUnavailable as exc:
                return CheckFailure("unavailable", str(exc), infrastructure=True)
        slot.job = key
        slot.deadline = time.monotonic() + self.check_timeout_s
        try:
            slot.conn.send((submission, data))
        except (BrokenPipeError, OSError):
            return self._retire(index, CheckFailure("crash", self._death(slot)))
        return None

    def wait(self) -> list[tuple[Any, Any]]:
        """Block until at least one running check ends; (key, outcome or CheckFailure) for each."""
        running = {s.conn: i for i, s in enumerate(self._slots) if s is not None and s.job is not None}
        if not running:
            return []
        timeout = max(0.0, min(self._slots[i].deadline for i in running.values()) - time.monotonic())
        finished = []
        for conn in wait(list(running), timeout=timeout):
            index = running[conn]
            slot = self._slots[index]
            try:
                message = conn.recv()
            except (EOFError, OSError):
                finished.append((slot.job, self._retire(index, CheckFailure("crash", self._death(slot)))))
                continue
            key, slot.job = slot.job, None
            if message[0] == "ok":
                finished.append((key, message[1]))
            else:
                _, text, infrastructure, trace = message
                finished.append((key, CheckFailure("error", text, infrastructure=infrastructure, trace=trace)))
        now = time.monotonic()
        for conn, index in running.items():
            slot = self._slots[index]
            if slot is not None and slot.job is not None and now >= slot.deadline:
                failure = CheckFailure("timeout", f"check exceeded {self.check_timeout_s:g}s")
                finished.append((slot.job, self._retire(index, failure)))
        return finished

    def close(self) -> None:
        for index, slot in enumerate(self._slots):
            if slot is not None:
                try:
                    slot.conn.send(None)
                except OSError:
                    pass
                slot.process.join(5)
                self._kill(slot)
                self._slots[index] = None

    def _start(self) -> _Slot:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child, self.factory), daemon=True)
        with _ctrl_c_ignored():
            process.start()
        child.close()
        slot = _Slot(process, parent)
        if not parent.poll(self.start_timeout_s):
            self._kill(slot)
            raise CheckerUnavailable(f"checker process not ready within {self.start_timeout_s:g}s")
        try:
            message = parent.recv()
        except (EOFError, OSError):
            raise CheckerUnavailable(f"checker process {self._death(slot)} while starting") from None
        if message[0] != "ready":
            self._kill(slot)
            raise CheckerUnavailable(f"checker could not start: {message[1]}")
        return slot

    def _retire(self, index: int, failure: CheckFailure) -> CheckFailure:
        slot = self._slots[index]
        self._slots[index] = None
        self.restarts += 1
        self._kill(slot)
        return failure

    @staticmethod
    def _death(slot: _Slot) -> str:
        slot.process.join(5)
        code = slot.process.exitcode
        if code is not None and code < 0:
            return f"died of {signal.Signals(-code).name}"
        return f"exited with status {code}"

    @staticmethod
    def _kill(slot: _Slot) -> None:
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join(5)
        slot.conn.close()
