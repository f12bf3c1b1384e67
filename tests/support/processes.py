"""Starting the project's commands as a person's terminal starts them."""

from __future__ import annotations

import signal


def ctrl_c_as_in_a_terminal() -> None:
    """`preexec_fn` of a child that a test will send SIGINT: Ctrl-C's default disposition, which the foreground job of
    a terminal has. A suite started in the background (`make test &`, `nohup`, a CI runner) inherits SIGINT ignored,
    and so would every child: Python then installs no KeyboardInterrupt handler and the signal does nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
