"""The console scripts' first frame: Ctrl-C while a command's modules import is one line and exit 130.

pip's console script imports the command's module before it calls anything, so a Ctrl-C in the first
seconds (web3, pydantic, torch importing) printed a KeyboardInterrupt traceback. Each role package's `main`
is `console_script("<its cli module>")`: nothing heavy is imported before the try below.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

EXIT_INTERRUPTED = 130


def console_script(module: str) -> Callable[[], int]:
    """The entry point of a console script that runs `module.main()`, importing `module` inside the try."""

    def main() -> int:
        try:
            command = importlib.import_module(module).main
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return command()

    main.__doc__ = f"`{module}.main()`, with Ctrl-C during its imports exiting {EXIT_INTERRUPTED} in one line."
    return main
