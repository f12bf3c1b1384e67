"""The console scripts' first frame: Ctrl-C while a command's modules import is one line and exit 130; SIGTERM
anywhere a Ctrl-C would stop the command stops it the same way (`Terminated`, one line and exit 143); a daemon's
Ctrl-C and SIGTERM once it has started (`stop_on_signals`: it finishes what it is doing, then 130 or 0).

pip's console script imports the command's module before it calls anything, so a Ctrl-C in the first
seconds (web3, pydantic, torch importing) printed a KeyboardInterrupt traceback. Each role package's `main`
is `console_script("<its cli module>")`: nothing heavy is imported before it, and a Ctrl-C while the command's
modules import is held until they are done, then ends the command in one line.

A Ctrl-C can also land where Python cannot raise it: in a finaliser, or in a callback from native code
(pydantic-core compiling a regex while it builds a schema). Python prints "Exception ignored in …" with a
traceback and the command goes on as if nothing happened. `_exit_on_swallowed_interrupt` turns that into
the same one line and exit 130; the interrupt was already lost, so no clean-up of the command's would
have run either way.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

EXIT_INTERRUPTED = 130
"""Ctrl-C: during the imports, the start-up or a daemon's run (cli.errors.EXIT_CODES maps KeyboardInterrupt to it).
Defined here, not in cli.errors: this module must import nothing heavy."""
EXIT_TERMINATED = 143
"""SIGTERM (128 + 15, as a shell reports a command the signal ended) for a command that had not done its job: any
one-shot command, a daemon's start-up. A daemon that has started stops on SIGTERM with 0 (`stop_on_signals`)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt: every clean-up that runs on Ctrl-C runs on it too
    (`try/finally`, `except KeyboardInterrupt`), and nothing is sent or written after it."""


def raise_terminated(*_: Any) -> None:
    """A SIGTERM handler: the command stops as on Ctrl-C, with `Terminated`."""
    raise Terminated()


def _report(interrupt: BaseException | None) -> int:
    """One line for a signal that stopped the command; its exit code."""
    terminated = isinstance(interrupt, Terminated)
    print(f"error: {'terminated' if terminated else 'interrupted'}", file=sys.stderr, flush=True)
    return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


def _exit_on_swallowed_interrupt(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """An unraisable-exception hook: a KeyboardInterrupt (or Terminated) Python had to ignore ends the process
    with 130 (143); anything else goes to `previous` (Python's own report)."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            code = _report(unraisable.exc_value)
            sys.stdout.flush()
            os._exit(code)
        previous(unraisable)

    return hook


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM noted, not raised, inside the block; raised as KeyboardInterrupt (Terminated) when it ends.
    For imports: raised inside a native extension's initialisation Ctrl-C became a Rust panic (PyCapsule_Import of
    datetime failing in a pyo3 module) with its own message and traceback. A command parses its arguments first,
    then imports its heavy modules inside this block. Outside the main thread (where no handler can be set) it
    holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: interrupted.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if interrupted:
        raise Terminated() if interrupted[0] == signal.SIGTERM else KeyboardInterrupt()


def console_script(module: str) -> Callable[[], int]:
    """The entry point of a console script that runs `module.main()`, importing `module` inside the try."""

    def main() -> int:
        sys.unraisablehook = _exit_on_swallowed_interrupt(sys.unraisablehook)
        # While the modules import, Ctrl-C and SIGTERM are noted, not raised (`signals_held`); the command stops as
        # soon as the imports are done.
        try:
            with signals_held():
                command = importlib.import_module(module).main
        except KeyboardInterrupt as interrupt:  # held during the imports, or raised by the imported code itself
            signal.signal(signal.SIGTERM, raise_terminated)
            return _report(interrupt)
        signal.signal(signal.SIGTERM, raise_terminated)
        return command()

    main.__doc__ = (f"`{module}.main()`, with Ctrl-C during its imports exiting {EXIT_INTERRUPTED} in one line, and "
                    f"SIGTERM stopping it as Ctrl-C does ({EXIT_TERMINATED}).")
    return main


def stop_on_signals(stop: threading.Event) -> Callable[[], int]:
    """From now on SIGTERM and SIGINT (Ctrl-C) set `stop`: a daemon finishes what it is doing and returns.
    Before this call Ctrl-C interrupts at once (start-up: nothing a rerun cannot resume). The returned
    function is the exit code: EXIT_INTERRUPTED after Ctrl-C, 0 after SIGTERM or none."""
    interrupted = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if not stop.is_set():  # one line, written unbuffered: the handler may run inside a print of the main thread
            name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
            os.write(2, f"{name}: stopping after what is in hand\n".encode())
        if signum == signal.SIGINT:
            interrupted.set()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return lambda: EXIT_INTERRUPTED if interrupted.is_set() else 0
