"""The trainer's intake at a long history: ms per new event and MB written per step with millions consumed.

    python -m bench.intake [--consumed N] [--files-per-step F] [--steps S] [--record [PROFILE]]

Issue 46, finding 3: with the consumed work ids in a list, `work_id not in consumed` took 150 ms at 2.9 M files and
the whole list was rewritten twice a step (202 MB). Here the real `LedgerSource.poll` (trainer/ledger_source.py) runs
over a synthetic history of N consumed ids (default 10 M) in a real `consumed.log` (trainer/consumed_log.py) on disk;
only the chain and IPFS are fakes (an event cursor handing out F `WorkSubmitted` + `WorkAccepted` pairs a step, an
accepted status, a fetch that returns an empty file without decoding it — decoding is not what this measures).

Figures: `trainer_ms_per_event` (one poll's wall time over the F files it consumed, median over the steps, after one
untimed poll that builds the validators),
`trainer_ms_per_event_max` the worst step's (wall time: on a shared machine it includes waiting for a core, which
`trainer_cpu_ms_per_event_max`, the process's CPU time, does not), `trainer_state_mb_per_step` (bytes a step adds to consumed.log plus the source's part of the checkpoint, which
`trainer start` writes once a step, plus consumed.json's record), `load_s` (a resume reading the log of N ids), the
log's size, and the process's peak RSS. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import trainer.ledger_source as ledger_source
from bench.cleanup import exit_on_signals
from bench.report import add_record_option, print_rows
from ledger_client.chain.bindings import WorkAccepted, WorkSubmitted
from ledger_client.chain.contract import EventMeta
from protocol.pool import WorkStatus
from protocol.rollouts import RolloutBatch
from trainer.consumed_log import LINE

POOL = 1
META = EventMeta(block_number=1, block_hash=b"\0" * 32, tx_hash=b"\0" * 32, log_index=0, address="0x0")
CHUNK = 1 << 20


class _Cursor:
    """The chain's events for the source: each poll hands out the next queued batch."""

    queued: list[list[object]] = []

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        self.state = {"block": 0}

    def poll(self, _latest: object) -> list[object]:
        return _Cursor.queued.pop(0) if _Cursor.queued else []


def write_history(path: Path, n: int) -> None:
    """A consumed log of `n` synthetic work ids (ids 0 … n-1), as `LedgerSource` writes them."""
    with path.open("wb") as handle:
        for start in range(0, n, CHUNK):
            handle.write(b"".join(b"0x%064x\n" % i for i in range(start, min(n, start + CHUNK))))
        handle.flush()
        os.fsync(handle.fileno())  # on disk, as a long run's log is: the measured appends wait for no writeback


def _events(first: int, files: int) -> list[object]:
    out: list[object] = []
    for i in range(first, first + files):
        work_id = i.to_bytes(32, "big")
        out += [WorkSubmitted(POOL, work_id, "0xw", b"\xaa" * 32, 0, 0, 128, 1, META),
                WorkAccepted(POOL, work_id, "0xv", META)]
    return out


def measure(consumed: int, files_per_step: int, steps: int, folder: Path) -> dict:
    log = folder / "consumed.log"
    write_history(log, consumed)
    fakes = {
        "EventCursor": _Cursor, "court_of": lambda *_: None,
        "pool_state": lambda *_: SimpleNamespace(challenge_window_s=0),
        "latest_block": lambda _w3: None, "chain_time": lambda _ledger: 2**40,
        "get_work": lambda _ledger, _work_id: SimpleNamespace(status=WorkStatus.ACCEPTED, submitted_at=0),
        "get_object": lambda _kubo, digest, timeout: digest,
        "decode_rollouts": lambda _data, batch=RolloutBatch.model_construct(): batch,  # built once, not timed
    }
    with mock.patch.multiple(ledger_source, **fakes):
        ledger = SimpleNamespace(deployment=SimpleNamespace(block=0), pool=None, w3=None)
        source = ledger_source.LedgerSource(ledger, kubo=None, pool_id=POOL, consumed_log=log)
        started = time.perf_counter()
        source.restore({"cursors": {"pool": {"block": 0}}, "consumed_log": {"entries": consumed}})
        load_s = time.perf_counter() - started
        _Cursor.queued = [_events(consumed, 1)]  # one file untimed: the first poll builds the WorkItem validator
        assert len(source.poll()) == 1
        consumed += 1
        ms_per_event, cpu_ms_per_event, bytes_per_step = [], [], []
        for step in range(steps):
            _Cursor.queued = [_events(consumed + step * files_per_step, files_per_step)]
            size_before = log.stat().st_size
            started, cpu_started = time.perf_counter(), time.process_time()
            items = source.poll()
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            assert len(items) == files_per_step, f"consumed {len(items)} of {files_per_step}"
            checkpoint = json.dumps(source.state())  # the source's part of trainer.json, written once a step
            record = json.dumps({"step": step, "consumed": len(source.consumed), "consumed_log": log.name,
                                 "pending": source.pending, "skipped": source.skipped,
                                 "unreadable": source.unreadable, "unsettled": source.unsettled,
                                 "overturned": source.overturned})  # consumed.json
            ms_per_event.append(1e3 * elapsed / files_per_step)
            cpu_ms_per_event.append(1e3 * cpu / files_per_step)
            bytes_per_step.append(log.stat().st_size - size_before + len(checkpoint) + len(record))
        assert len(source.consumed) == consumed + steps * files_per_step
        log_mb = log.stat().st_size / 1e6
    return {
        "consumed": consumed - 1, "files_per_step": files_per_step, "steps": steps,
        "trainer_ms_per_event": round(statistics.median(ms_per_event), 4),
        "trainer_ms_per_event_max": round(max(ms_per_event), 4),
        "trainer_cpu_ms_per_event_max": round(max(cpu_ms_per_event), 4),
        "trainer_state_mb_per_step": round(max(bytes_per_step) / 1e6, 4),
        "load_s": round(load_s, 2), "log_mb": round(log_mb, 1), "log_bytes_per_file": LINE,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.intake", description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumed", type=int, default=10_000_000, help="work ids consumed before (default 10 M)")
    parser.add_argument("--files-per-step", type=int, default=32, help="files the trainer consumes a step")
    parser.add_argument("--steps", type=int, default=20, help="steps measured")
    add_record_option(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        result = measure(args.consumed, args.files_per_step, args.steps, Path(tmp))
    print(f"trainer intake with {args.consumed:,} files consumed before, {args.files_per_step} a step")
    rows = [
        ("ms per new event (median)", f"{result['trainer_ms_per_event']:.4f}"),
        ("ms per new event (worst step)", f"{result['trainer_ms_per_event_max']:.4f}"),
        ("  CPU ms (worst step)", f"{result['trainer_cpu_ms_per_event_max']:.4f}"),
        ("MB written per step", f"{result['trainer_state_mb_per_step']:.4f}"),
        ("resume: log read in s", f"{result['load_s']:.2f}"),
        ("consumed.log MB", f"{result['log_mb']:.1f}"),
        ("peak RSS MB", str(result["peak_rss_mb"])),
    ]
    print_rows(rows, result, args, "intake")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
