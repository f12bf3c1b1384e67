"""A real RolloutChecker with a test hook: a file whose sha256 has a marker file in `hooks_dir`
makes the checker process segfault (`<hex>.segfault`) or hang (`<hex>.hang`) before checking it.

Stands in for a file that finds a crash or an endless loop in the checker (issue 12, items
11 and 14): the daemon must survive either and challenge the file after repeated failures."""

from __future__ import annotations

import ctypes
import hashlib
import time
from pathlib import Path

from validator.checks import RolloutChecker
from validator.outcome import CheckOutcome, Submission


class HookedChecker(RolloutChecker):
    def __init__(self, hooks_dir: Path, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hooks_dir = Path(hooks_dir)

    def check(self, sub: Submission, data: bytes) -> CheckOutcome:
        name = hashlib.sha256(data).hexdigest()
        if (self.hooks_dir / f"{name}.segfault").exists():
            ctypes.string_at(0)  # SIGSEGV, as a C-stack overflow in a parser would
        if (self.hooks_dir / f"{name}.hang").exists():
            time.sleep(3600)
        return super().check(sub, data)
