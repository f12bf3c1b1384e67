"""The error every room may raise for input a person must fix.

Library code (a role's daemon or producer, a client) cannot know which command called it, so it does not raise the
command line's `UsageError` (cli.errors): it raises `InvalidInput`, or a subclass naming the problem (e.g.
`worker.journal.JournalCorrupt`). The exit table (`cli.errors.EXIT_CODES`) gives it exit 2, as a `UsageError`:
bad usage, configuration or input; nothing was done.
"""

from __future__ import annotations


class InvalidInput(Exception):
    """Input, configuration or local state that a person must fix before the command can do its job (exit code 2);
    the message says what and how."""
