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
from dataclasses import dataclass, field
from pathlib import Path

from validator.outcome import Submission

AT_THE_NEXT_POLL = 0.0
"""The retry delay of a file that waits for a block to come (the court's draw needs block B + 2, the spot check's
randomness B + 1): polls come with each new block (or the poll interval), so it is looked at again then. Waiting a
poll interval instead kept a devnet file ~0.5 s from its verdict — a trainer step of the CPU recipe."""


@dataclass
class Attempts:
    """What went wrong so far for one submission (one entry of the book)."""

    submission: Submission
    fetch: int = 0
    checker: int = 0
    errors: int = 0
    next_at: float = 0.0
    history: list[str] = field(default_factory=list)

    def to_record(self) -> dict:
        return {"submission": self.submission.to_record(), "fetch": self.fetch, "checker": self.checker,
                "errors": self.errors, "next_at": self.next_at, "history": self.history}

    @classmethod
    def from_record(cls, d: dict) -> Attempts:
        return cls(**{**d, "submission": Submission.from_record(d["submission"])})


class RetryBook:
    """Submission key (`Submission.key`) → Attempts, in a JSON file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: dict[str, Attempts] = {}
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            self.entries = {k: Attempts.from_record(v) for k, v in raw.items()}
        self._written: str | None = None
        """What the file holds, as this book last wrote it: a poll that changed nothing writes nothing."""

    def get(self, key: str) -> Attempts | None:
        return self.entries.get(key)

    def record(self, submission: Submission, kind: str, message: str, backoff_s: float) -> Attempts:
        """Count one failed attempt of `kind` ("fetch", "checker" or "errors") and schedule the next."""
        entry = self.entries.setdefault(submission.key, Attempts(submission=submission))
        setattr(entry, kind, getattr(entry, kind) + 1)
        attempts = entry.fetch + entry.checker + entry.errors
        entry.next_at = time.time() + backoff_s * 2 ** min(attempts - 1, 10)
        entry.history = (entry.history + [f"{kind}: {message[:200]}"])[-8:]
        return entry

    def postpone(self, submission: Submission, delay_s: float) -> Attempts:
        """Try `submission` again after `delay_s` without counting a failed attempt (it waits for something)."""
        entry = self.entries.setdefault(submission.key, Attempts(submission=submission))
        entry.next_at = time.time() + delay_s
        return entry

    def drop(self, key: str) -> None:
        self.entries.pop(key, None)

    def due(self, now: float | None = None) -> list[Submission]:
        now = time.time() if now is None else now
        return [e.submission for e in self.entries.values() if e.next_at <= now]

    def next_at(self) -> float:
        """When the earliest entry is due (wall clock); infinity for an empty book."""
        return min((e.next_at for e in self.entries.values()), default=float("inf"))

    def save(self) -> bool:
        """Write the book atomically if it changed since it was last written; True if it was written."""
        data = json.dumps({k: v.to_record() for k, v in self.entries.items()})
        if data == self._written:
            return False
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".retries.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            handle.write(data)
        os.replace(tmp, self.path)
        self._written = data
        return True
