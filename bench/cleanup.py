"""A bench stopped by a signal cleans up as one that finished: `exit_on_signals()` (each bench's `__main__` calls it).

Benches start anvil, Kubo nodes, devnets, role processes and worker pools, each in a `with` block or a `try/finally`
that stops it — in their own sessions, so a signal to the bench reaches none of them. Python runs those blocks on a
normal exit and on Ctrl-C (SIGINT raises KeyboardInterrupt), but SIGTERM — what `timeout`, CI and `kill` send — ended
the interpreter at once and left the children running (issue 46, finding 7). Here SIGTERM and SIGHUP raise
`SystemExit(128 + signal)` in the main thread instead, so every `finally`, `__exit__` and `atexit` runs; once one
signal arrived, later ones are ignored so that a second SIGTERM cannot cut the cleanup short (`timeout -k` still ends
a cleanup that hangs). SIGINT keeps Python's KeyboardInterrupt. Installed only when a bench runs as a program, never
on import: tests call benches' `main()` inside pytest, whose own handlers stay.
"""

from __future__ import annotations

import signal
from types import FrameType

STOPPING = (signal.SIGTERM, signal.SIGHUP)
"""Signals that end a bench through its cleanup (SIGINT does already, as KeyboardInterrupt)."""


def exit_on_signals() -> None:
    """SIGTERM and SIGHUP raise SystemExit(128 + signal) in the main thread (module docstring)."""
    for signum in STOPPING:
        signal.signal(signum, _exit)


def _exit(signum: int, _frame: FrameType | None) -> None:
    for other in (*STOPPING, signal.SIGINT):  # the cleanup the SystemExit starts runs to its end
        signal.signal(other, signal.SIG_IGN)
    raise SystemExit(128 + signum)
