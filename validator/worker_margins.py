"""Per-worker accumulation of the margin test across submissions (proofs.margins), kept on disk.

A file whose margins are only slightly off the honest distribution passes the per-file test; many of them add
up. For each worker the book keeps the (checked tokens, margin sum) of every file this validator accepted on
the margin test since the worker's last accumulated challenge, and the e-process of proofs.margins over them,
each file's factor under its own null (a policy may carry its own tolerances) and the honest spread (a file's
flip rate varies with its prompts: proofs.margins): an honest worker's ever reaches 1/α with probability at most
α (the run spec's `worker_false_positive_rate`), however many files it submits. When it does, the submission
being judged is challenged SAMPLING with the files, their totals and the e-value as evidence, and the book starts
afresh.

Crash safety: the book is written atomically before the verdict is sent; a file is counted once per work id,
and a challenge decided for a work id is kept with it, so a check repeated after a kill -9 gives the same
verdict and counts nothing twice.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from proofs.margins import FACTOR_VERSION, WORKER_LAMBDAS, MarginNull, log_e_value

MAX_EVIDENCE_FILES = 64
"""Work ids listed in a challenge's evidence (the totals cover them all)."""


class WorkerMargins:
    """worker (lower-case address) → {"open": {work id: [tokens, score, [log factor per λ]]}, "challenged":
    {work id: evidence}, "factors": proofs.margins.FACTOR_VERSION}. Files without factors of this version (a book
    written before files kept them, or before the spread: i.i.d. factors, no "factors" key) keep [tokens, score]
    and count under the null of the file being judged."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.workers: dict[str, dict] = json.loads(self.path.read_text()) if self.path.exists() else {}
        for book in self.workers.values():
            if book.get("factors") != FACTOR_VERSION:
                book["open"] = {work_id: entry[:2] for work_id, entry in book["open"].items()}
                book["factors"] = FACTOR_VERSION

    def judge(self, worker: str, work_id: str, tokens: int, score: float, null: MarginNull,
              worker_false_positive_rate: float) -> dict[str, Any] | None:
        """Count one accepted file and test the worker: the evidence of an accumulated challenge of `work_id`,
        or None. Saved before it returns; the same work id always gets the same answer."""
        book = self.workers.setdefault(worker.lower(), {"open": {}, "challenged": {}, "factors": FACTOR_VERSION})
        if work_id in book["challenged"]:
            return book["challenged"][work_id]
        book["open"].setdefault(work_id, [tokens, score, null.worker_log_terms(score, tokens)])
        total_tokens = sum(entry[0] for entry in book["open"].values())
        total_score = sum(entry[1] for entry in book["open"].values())
        log_e = self.log_e_value(worker, null)
        evidence = None
        if log_e >= math.log(1 / worker_false_positive_rate):
            files = list(book["open"])
            evidence = {"files": len(files), "work_ids": files[-MAX_EVIDENCE_FILES:], "tokens": total_tokens,
                        "score": total_score, "log_e_value": log_e,
                        "worker_false_positive_rate": worker_false_positive_rate, "factors": FACTOR_VERSION}
            book["challenged"][work_id] = evidence
            book["open"] = {}
        self.save()
        return evidence

    def log_e_value(self, worker: str, null: MarginNull) -> float:
        """log of `worker`'s e-process over its open files (0 with none); files without their own factors count
        under `null`."""
        sums = [0.0] * len(WORKER_LAMBDAS)
        for entry in self.workers.get(worker.lower(), {"open": {}})["open"].values():
            terms = entry[2] if len(entry) > 2 else null.worker_log_terms(entry[1], entry[0])
            sums = [a + b for a, b in zip(sums, terms)]
        return log_e_value(sums)

    def save(self) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".worker_margins.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(self.workers, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)


NULL_USE_FILES = 256
"""Accepted files over which `NullUse` measures the pool's use of the margin null."""


class NullUse:
    """How much of the margin null's allowance the files this validator accepts use: their mean rounded margin
    per token over the last `NULL_USE_FILES` accepted files, divided by the null's mean (MarginNull.mean), each
    file under its own policy's null. Honest workers of the calibrated population stay below 1 (the null is an
    upper confidence bound on them); a pool whose policy has outgrown its calibration drifts above it, before its
    honest workers are challenged — the sign to recalibrate (`validator calibrate --pool`)."""

    def __init__(self, files: int = NULL_USE_FILES):
        self.files: deque[tuple[int, float, float]] = deque(maxlen=files)  # (tokens, score, the null's mean)

    def add(self, tokens: int, score: float, null: MarginNull) -> float:
        """Count one accepted file; the use now."""
        if tokens > 0:
            self.files.append((tokens, score, null.mean()))
        return self.use()

    def use(self) -> float:
        allowed = sum(n * mean for n, _, mean in self.files)
        return sum(s for _, s, _ in self.files) / allowed if allowed > 0 else 0.0
