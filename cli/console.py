"""The console scripts' first frame: Ctrl-C while a command's modules import is one line and exit 130; a
daemon's Ctrl-C and SIGTERM (`stop_on_signals`).

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
from collections.abc import Callable
from typing import Any

EXIT_INTERRUPTED = 130
"""Ctrl-C: during the imports, the start-up or a daemon's run (cli.errors.EXIT_CODES maps KeyboardInterrupt to it).
Defined here, not in cli.errors: this module must import nothing heavy."""


def _report_interrupt() -> None:
    print("error: interrupted", file=sys.stderr, flush=True)


def _exit_on_swallowed_interrupt(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """An unraisable-exception hook: a KeyboardInterrupt Python had to ignore ends the process with 130;
    anything else goes to `previous` (Python's own report)."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _report_interrupt()
            sys.stdout.flush()
            os._exit(EXIT_INTERRUPTED)
        previous(unraisable)

    return hook


def console_script(module: str) -> Callable[[], int]:
    """The entry point of a console script that runs `module.main()`, importing `module` inside the try."""

    def main() -> int:
        sys.unraisablehook = _exit_on_swallowed_interrupt(sys.unraisablehook)
        interrupted: list[int] = []
        # While the modules import, Ctrl-C is noted, not raised: raised inside a native extension's initialisation
        # it became a Rust panic (PyCapsule_Import of datetime failing in a pyo3 module) with its own message and
        # traceback. The command stops as soon as the imports are done.
        previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
        try:
            command = importlib.import_module(module).main
        except KeyboardInterrupt:  # raised by the imported code itself
            interrupted.append(signal.SIGINT)
        finally:
            signal.signal(signal.SIGINT, previous)
        if interrupted:
            _report_interrupt()
            return EXIT_INTERRUPTED
        return command()

    main.__doc__ = f"`{module}.main()`, with Ctrl-C during its imports exiting {EXIT_INTERRUPTED} in one line."
    return main


def stop_on_signals(stop: threading.Event) -> Callable[[], int]:
    """From now on SIGTERM and SIGINT (Ctrl-C) set `stop`: a daemon finishes what it is doing and returns.
    Before this call Ctrl-C interrupts at once (start-up: nothing a rerun cannot resume). The returned
    function is the exit code: EXIT_INTERRUPTED after Ctrl-C, 0 after SIGTERM or none."""
    interrupted = threading.Event()

    def on_interrupt(*_: Any) -> None:
        interrupted.set()
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, on_interrupt)
    return lambda: EXIT_INTERRUPTED if interrupted.is_set() else 0
