"""The trainer's demand note: how many rollout files a step needs, and how many it holds already.

A worker that generates faster than the trainer learns makes files that arrive too stale to use: in a
`bench.protocol` run a quarter of the groups were dropped stale, each file generated, proven, uploaded, submitted and
checked for nothing, on cores the trainer shares. The local worker paces itself on the trainer's progress file
(worker/local_cli.py); through the protocol the trainer says the same in the metrics object each checkpoint's manifest
names (`files_per_step_needed`, `buffered_files`, `recent_workers`), and a worker paces on it (worker/pacing.py).
The note is advice: nothing on-chain depends on it, and a worker that ignores it is paid for its accepted files all
the same (docs/protocol.md, "Pacing").
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

INFORMATIVE_EMA = 0.1
"""Weight of each taken file in the running mean of its informative groups (~ the last 20 files)."""
RECENT_FILES = 64
"""The fewest recent files whose workers count as the pool's recent workers ..."""
WINDOW_PER_WORKER = 3
"""... and the window of recent files is this many times the workers counted in it: paced workers send files at equal
expected rates, so among 3·W files each of W active workers is seen with probability ≥ 1 − e⁻³ ≈ 95% (the count
sits within ~6% of the pool, at 10 workers or 10,000; docs/protocol.md, "Pacing")."""


MAX_NOTE_VALUE = 2**32
"""The largest files a step, files held or workers a note may state (and 1 / it the fewest files a step); a note past
these (or not finite) is malformed and nobody paces on it."""


@dataclass(frozen=True)
class DemandNote:
    """What the trainer needs per step and holds, in files (a file's informative groups as the trainer has seen them)."""

    files_per_step: float
    buffered_files: float
    workers: int

    @classmethod
    def from_metrics(cls, metrics: dict[str, Any] | None) -> DemandNote | None:
        """The note in a step's metrics object; None when there is none or it is malformed (then nobody paces)."""
        if not isinstance(metrics, dict):
            return None
        try:
            needed, buffered = float(metrics["files_per_step_needed"]), float(metrics["buffered_files"])
            workers = int(metrics["recent_workers"])
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        if not (1 / MAX_NOTE_VALUE <= needed <= MAX_NOTE_VALUE and 0 <= buffered <= MAX_NOTE_VALUE
                and 1 <= workers <= MAX_NOTE_VALUE):
            return None
        return cls(needed, buffered, workers)


class DemandEstimate:
    """The trainer's side: informative groups per file (a running mean over the files it takes) and the workers of
    the recent ones; `note()` is the demand it publishes with each step."""

    def __init__(self, groups_per_batch: int) -> None:
        self.groups_per_batch = groups_per_batch
        self.informative_per_file: float | None = None
        self._workers: deque[str] = deque()  # the window of recent files' workers, oldest first
        self._files_of: Counter[str] = Counter()  # files of each worker in the window

    def file_taken(self, informative_groups: int, worker: str) -> None:
        """A file fresh enough to use, with its number of informative groups."""
        mean = self.informative_per_file
        self.informative_per_file = informative_groups if mean is None else \
            mean + INFORMATIVE_EMA * (informative_groups - mean)
        self._workers.append(worker)
        self._files_of[worker] += 1
        while len(self._workers) > max(RECENT_FILES, WINDOW_PER_WORKER * len(self._files_of)):
            old = self._workers.popleft()
            self._files_of[old] -= 1
            if not self._files_of[old]:
                del self._files_of[old]

    @property
    def recent_workers(self) -> int:
        """Distinct workers among the recent files (the window above; O(1) a file whatever the pool's size)."""
        return len(self._files_of)

    def note(self, buffered_groups: int) -> dict[str, Any]:
        """The metrics fields of the demand note; needed and buffered are None while no file had an informative
        group (every file is needed then)."""
        per_file = self.informative_per_file
        if not per_file:
            return {"files_per_step_needed": None, "buffered_files": None, "recent_workers": self.recent_workers}
        return {"files_per_step_needed": round(self.groups_per_batch / per_file, 3),
                "buffered_files": round(buffered_groups / per_file, 3),
                "recent_workers": max(1, self.recent_workers)}
