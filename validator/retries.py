"""Submissions the validator has seen but not yet judged, persisted so the cursor can move on.

A submission lands here when its file could not be fetched, its check crashed, hung or raised,
or its verdict could not be sent. Each entry counts the attempts of each kind and says when to
try again (exponential backoff); the daemon decides when the counts warrant a challenge. The
book is written atomically before the event cursor is committed, so a kill -9 loses nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Attempts:
    """What went wrong so far for one submission (one entry of the book)."""

    submission: dict
    fetch: int = 0
    checker: int = 0
    errors: int = 0
    next_at: float = 0.0
    history: list[str] = field(default_factory=list)


class RetryBook:
    """work id (hex) → Attempts, in a JSON file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: dict[str, Attempts] = {}
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            self.entries = {k: Attempts(**v) for k, v in raw.items()}

    def get(self, key: str) -> Attempts | None:
        return self.entries.get(key)

    def record(self, key: str, submission: dict, kind: str, message: str, backoff_s: float) -> Attempts:
        """Count one failed attempt of `kind` ("fetch", "checker" or "errors") and schedule the next."""
        entry = self.entries.setdefault(key, Attempts(submission=submission))
        setattr(entry, kind, getattr(entry, kind) + 1)
        attempts = entry.fetch + entry.checker + entry.errors
        entry.next_at = time.time() + backoff_s * 2 ** min(attempts - 1, 10)
        entry.history = (entry.history + [f"{kind}: {message[:200]}"])[-8:]
        return entry

    def postpone(self, key: str, submission: dict, delay_s: float) -> Attempts:
        """Try `key` again after `delay_s` without counting a failed attempt (it waits for something)."""
        entry = self.entries.setdefault(key, Attempts(submission=submission))
        entry.next_at = time.time() + delay_s
        return entry

    def drop(self, key: str) -> None:
        self.entries.pop(key, None)

    def due(self, now: float | None = None) -> list[dict]:
        now = time.time() if now is None else now
        return [e.submission for e in self.entries.values() if e.next_at <= now]

    def save(self) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".retries.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump({k: asdict(v) for k, v in self.entries.items()}, handle)
        os.replace(tmp, self.path)
