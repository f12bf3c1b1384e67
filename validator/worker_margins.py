"""Per-worker accumulation of the margin test across submissions (proofs.margins), kept on disk.

A file whose margins are only slightly off the honest distribution passes the per-file test; many of them add
up. For each worker the book keeps the (checked tokens, margin sum) of every file this validator accepted on
the margin test since the worker's last accumulated challenge, and the e-process of proofs.margins over them,
each file's factor under its own null (a policy may carry its own tolerances) and the honest spread (a file's
flip rate varies with its prompts: proofs.margins): an honest worker's ever reaches 1/α with probability at most
α (the run spec's `worker_false_positive_rate`), however many files it submits. When it does, the submission
being judged is challenged SAMPLING with the files, their totals and the e-value as evidence, and the book starts
afresh.

What a file's factor means depends on the pool's honest spread (the run spec's `verification.spread_shape` k and
`verification.miscalibration` c, carried by every null): a book records the spread its factors were computed under
(`"spread": [k, c]`, beside `"factors"`), and one whose files met another spread keeps their tokens and score only, to
count again under the null being judged (`_current_factors`) — the same step in the log, so a replay meets it too.
A pool's book is its own file (`book_path`), so two pools one validator serves never share a worker's files.

Persistence: `worker_margins.pool<id>.json` and its append-only log `worker_margins.pool<id>.json.log` (state_journal):
each judgement that changes the book appends one line (the file counted, and a challenge's evidence), O(1) per
verdict — the book, which grows with the pool's history, is rewritten only when the log has outgrown it (issue 46);
a book written whole before the log is read as it was. Crash safety: the line is written (and fsynced) before the
verdict is sent; a file is counted once per work id, and a challenge decided for a work id is kept with it, so a
check repeated after a kill -9 gives the same verdict and counts nothing twice (a torn last line is a judgement
whose verdict was never sent).
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Any

from proofs.margins import FACTOR_VERSION, MISCALIBRATION, SPREAD_SHAPE, WORKER_LAMBDAS, MarginNull, log_e_value
from validator.state_journal import StateJournal, log_path

MAX_EVIDENCE_FILES = 64
"""Work ids listed in a challenge's evidence (the totals cover them all)."""
LEGACY_SPREAD = [SPREAD_SHAPE, MISCALIBRATION]
"""The spread of a book that names none: every null had these k and c before the run spec stated them."""
LEGACY_BOOK = "worker_margins.json"
"""The one book of a state folder before books were kept per pool."""


def book_path(state_dir: Path, pool_id: int) -> Path:
    """Pool `pool_id`'s book in a validator's state folder. A folder's book from before books were kept per pool
    (`LEGACY_BOOK`, and its log) becomes the book of the first pool opened there: a state folder served one pool
    (its event cursor follows one). The log moves first, so a kill -9 between the moves loses nothing."""
    path = Path(state_dir) / f"worker_margins.pool{pool_id}.json"
    legacy = Path(state_dir) / LEGACY_BOOK
    for old, new in ((log_path(legacy), log_path(path)), (legacy, path)):
        if old.exists() and not new.exists():
            old.replace(new)
    return path


def spread_of(null: MarginNull) -> list:
    """[k, c]: the honest spread a file's factor under `null` assumes (k None: tokens i.i.d.)."""
    return [null.spread_shape, null.miscalibration]


class WorkerMargins:
    """worker (lower-case address) → {"open": {work id: [tokens, score, [log factor per λ], [tokens per prompt]]},
    "challenged": {work id: evidence}, "factors": FACTOR_VERSION, "spread": [k, c]}, one pool's (`book_path`). A file
    whose factors meant something else (another version or another spread, `_current_factors`) keeps [tokens, score,
    None, [tokens per prompt]] and counts under the null of the file being judged; so does one of a book written
    before files kept their factors, [tokens, score], or their prompts, [tokens, score, factors]: as one prompt."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.journal = StateJournal(self.path, "worker margins", _apply)
        self.workers: dict[str, dict[str, Any]] = self.journal.load()
        for book in self.workers.values():
            _current_factors(book)
        self._totals: dict[str, OpenTotals] = {}
        """worker → its open files summed, kept as files are counted: a judgement costs O(1) however long an honest
        worker's book grows (it is spent only by a challenge); rebuilt from the book when a challenge or a recount
        changed it."""

    def judge(self, worker: str, work_id: str, prompt_tokens: list[int], score: float, null: MarginNull,
              worker_false_positive_rate: float) -> dict[str, Any] | None:
        """Count one accepted file (its checked tokens per prompt, as the per-file test grouped them, and its
        score) and test the worker: the evidence of an accumulated challenge of `work_id`, or None. Saved before it
        returns; the same work id always gets the same answer."""
        spread = spread_of(null)
        book = self.workers.setdefault(worker.lower(), {"open": {}, "challenged": {}, "factors": FACTOR_VERSION,
                                                        "spread": spread})
        if work_id in book["challenged"]:
            return book["challenged"][work_id]
        recounted = _current_factors(book, FACTOR_VERSION, spread)
        if recounted:
            self._totals.pop(worker.lower(), None)
        totals = self._open_totals(worker.lower())
        change: dict[str, Any] = {"worker": worker.lower(), "work_id": work_id, "factors": FACTOR_VERSION,
                                  "spread": spread}
        if work_id not in book["open"]:
            prompt_tokens = [int(n) for n in prompt_tokens]
            change["file"] = book["open"][work_id] = [sum(prompt_tokens), score,
                                                      null.worker_log_terms(score, prompt_tokens), prompt_tokens]
            totals.add(change["file"])
        log_e = totals.log_e_value(null)
        evidence = None
        if log_e >= math.log(1 / worker_false_positive_rate):
            files = list(book["open"])
            evidence = {"files": len(files), "work_ids": files[-MAX_EVIDENCE_FILES:], "tokens": totals.tokens,
                        "score": totals.score, "log_e_value": log_e,
                        "worker_false_positive_rate": worker_false_positive_rate, "factors": FACTOR_VERSION,
                        "spread": spread}
            change["challenge"] = evidence
            _challenge(book, work_id, evidence)
            self._totals.pop(worker.lower(), None)
        if "file" in change or "challenge" in change or recounted:
            self._save(change)
        return evidence

    def log_e_value(self, worker: str, null: MarginNull) -> float:
        """log of `worker`'s e-process over its open files (0 with none); files without their own factors count
        under `null`."""
        return self._open_totals(worker.lower()).log_e_value(null)

    def _open_totals(self, worker: str) -> OpenTotals:
        totals = self._totals.get(worker)
        if totals is None:
            totals = self._totals[worker] = OpenTotals()
            for entry in self.workers.get(worker, {"open": {}})["open"].values():
                totals.add(entry)
        return totals

    def _save(self, change: dict[str, Any]) -> None:
        """Log one judgement's change; the whole book as a new snapshot instead once the log has outgrown the last."""
        if self.journal.due():
            self.journal.compact(self.workers)
        else:
            self.journal.append(change)


class OpenTotals:
    """A worker's open files summed: tokens, score, and the per-λ log factors of the files that carry theirs (what
    `WorkerMargins.judge` tests; bench.stated_rates runs simulated honest books through it). Files
    of an older book without factors (a few, from before a version or spread change; never more) are kept apart,
    since they count under the null of the file being judged."""

    def __init__(self) -> None:
        self.tokens, self.score = 0, 0.0
        self.log_terms = [0.0] * len(WORKER_LAMBDAS)
        self.unfactored: list[tuple[list[int], float]] = []

    def add(self, entry: list) -> None:
        self.tokens += entry[0]
        self.score += entry[1]
        if len(entry) > 2 and entry[2] is not None:
            self.log_terms = [a + b for a, b in zip(self.log_terms, entry[2], strict=True)]
        else:
            self.unfactored.append((entry[3] if len(entry) > 3 else [entry[0]], entry[1]))

    def log_e_value(self, null: MarginNull) -> float:
        sums = self.log_terms
        for prompt_tokens, score in self.unfactored:
            sums = [a + b for a, b in zip(sums, null.worker_log_terms(score, prompt_tokens), strict=True)]
        return log_e_value(sums)


def _challenge(book: dict[str, dict], work_id: str, evidence: dict[str, Any]) -> None:
    """A challenge of `work_id`: its evidence kept with it, and the worker's open files spent."""
    book["challenged"][work_id] = evidence
    book["open"] = {}


def _current_factors(book: dict[str, Any], version: int = FACTOR_VERSION, spread: list | None = None) -> bool:
    """A book whose files' factors meant another version (1: i.i.d. tokens) or, given `spread`, were computed under
    another honest spread keeps their [tokens, score] only, so they count again under the null of the file being
    judged; the same step wherever a load, a judgement or a replay meets it. A book that names no spread was
    computed under `LEGACY_SPREAD`. A file keeps its prompts' tokens where it has them. Whether its files' factors
    were dropped."""
    stale = book.get("factors") != version
    if spread is not None:
        stale = stale or book.get("spread", LEGACY_SPREAD) != spread
        book["spread"] = spread
    if stale:
        book["open"] = {work_id: [*entry[:2], None, entry[3]] if len(entry) > 3 else entry[:2]
                        for work_id, entry in book["open"].items()}
        book["factors"] = version
    return stale


def _apply(workers: dict[str, Any], change: dict[str, Any]) -> None:
    """Replay one logged judgement: the book brought to the change's factor version and spread, the file counted
    (unless counted already), then the challenge, if any."""
    book = workers.setdefault(change["worker"], {"open": {}, "challenged": {}})
    if "factors" in change:
        _current_factors(book, change["factors"], change.get("spread"))
    if "file" in change:
        book["open"].setdefault(change["work_id"], change["file"])
    if "challenge" in change:
        _challenge(book, change["work_id"], change["challenge"])


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
