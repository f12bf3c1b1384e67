"""What a validator's save of its court duties and worker margin book costs, as the pool's history grows.

Before issue 46 each save rewrote the whole file (court.json at every poll and vote, worker_margins.json at every
accepted file): O(history) per verdict. Now each is a snapshot plus an append-only log (validator/state_journal.py).
This bench fills each with a history of `--history` entries (open court duties; accepted files in the margin book,
spread over `--workers` workers, none challenged), then times `--saves` saves of one change each: the bytes and
milliseconds of an append, beside those of the whole-file write that every save was before (the same fsynced atomic
write a compaction does; one compaction per 4x the snapshot's size of log adds a quarter to the bytes, amortised —
rarely within a run this short). No chain, no Kubo: the files only.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, print_rows
from proofs.margins import MarginNull
from validator.court import CourtDuties
from validator.worker_margins import WorkerMargins

NEVER = 1e-300
"""A worker false-positive rate no e-value here reaches: the book only grows."""


def _timed(save, saves: int) -> tuple[float, float]:
    """Median ms of `saves` calls of `save()` (each makes and saves one change), and the mean bytes written."""
    times, written = [], 0
    for i in range(saves):
        start = time.perf_counter()
        written += save(i) or 0
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), written / saves


def court(history: int, saves: int, folder: Path) -> dict[str, float]:
    duties = CourtDuties(folder / "court.json")
    duties.book.finalize.update({f"{i:064x}": 1_000 + i for i in range(history)})
    duties.save()
    whole_ms, whole_bytes = _timed(lambda i: duties.journal.compact(duties.state()), 5)

    def one_change(i: int) -> int:
        duties.book.finalize.pop(f"{i:064x}")
        duties.book.finalize[f"{history + i:064x}"] = 2_000 + i
        return duties.save()

    append_ms, append_bytes = _timed(one_change, saves)
    return {"court_whole_ms": whole_ms, "court_whole_bytes": whole_bytes, "court_save_ms": append_ms,
            "court_save_bytes": append_bytes}


def margins(history: int, workers: int, saves: int, folder: Path) -> dict[str, float]:
    null = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6)
    book = WorkerMargins(folder / "worker_margins.json")
    terms = null.worker_log_terms(0.0, [2048])
    for i in range(history):
        book.workers.setdefault(f"0x{i % workers:040x}", {"open": {}, "challenged": {}})["open"][f"0x{i:064x}"] = \
            [2048, 0.0, terms]
    book.journal.compact(book.workers)
    whole_ms, whole_bytes = _timed(lambda i: book.journal.compact(book.workers), 5)
    append_ms, append_bytes = _timed(
        lambda i: _logged(book, f"0x{i % workers:040x}", f"0x{history + i:064x}", null), saves)
    return {"margins_whole_ms": whole_ms, "margins_whole_bytes": whole_bytes, "margins_save_ms": append_ms,
            "margins_save_bytes": append_bytes}


def _logged(book: WorkerMargins, worker: str, work_id: str, null: MarginNull) -> int:
    """One judgement; the bytes its save wrote (a log line, or a compaction's snapshot)."""
    before = book.journal.written
    book.judge(worker, work_id, [2048], 0.0, null, NEVER)
    return book.journal.written - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_files", description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=int, default=100_000, help="entries in each file before (default 100k)")
    parser.add_argument("--workers", type=int, default=1_000, help="workers the margin book's files spread over")
    parser.add_argument("--saves", type=int, default=200, help="saves timed (default 200)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-state-files-") as tmp:
        result = court(args.history, args.saves, Path(tmp)) | margins(args.history, args.workers, args.saves, Path(tmp))
    print(f"a validator's saves with {args.history:,} entries of history ({args.workers:,} workers in the margin book)")
    rows = [
        ("court.json: whole rewrite ms", f"{result['court_whole_ms']:.2f}"),
        ("court.json: whole rewrite KB", f"{result['court_whole_bytes'] / 1e3:.0f}"),
        ("court.json: save ms (median)", f"{result['court_save_ms']:.2f}"),
        ("court.json: save bytes (mean)", f"{result['court_save_bytes']:.0f}"),
        ("worker_margins.json: whole rewrite ms", f"{result['margins_whole_ms']:.2f}"),
        ("worker_margins.json: whole rewrite KB", f"{result['margins_whole_bytes'] / 1e3:.0f}"),
        ("worker_margins.json: save ms (median)", f"{result['margins_save_ms']:.2f}"),
        ("worker_margins.json: save bytes (mean)", f"{result['margins_save_bytes']:.0f}"),
    ]
    print_rows(rows, result, args, "state_files")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
