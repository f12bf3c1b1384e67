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
log's size, and the process's peak RSS.

Decoding (issue 46, "a thousand workers": ~33 files/s arrive, a 128 × 1,000-token file took ~0.07 s to decode in the
trainer's process): the same `LedgerSource.poll`, this time with the real `decode_rollouts` on synthetic files of 128
completions × `--decode-tokens` random token ids with TOPLOC proofs every 32 tokens (500 tokens: ~1 MB), fetched from a
fake Kubo. `--decode-files` files in one poll, decoded in process (`decode_workers` 0) and then in a pool of
`--decode-workers` processes (default one per core; the pool is started and warmed by an untimed poll first):
`decode_serial_files_per_s`, `decode_pool_files_per_s`, their ratio, `decode_files_per_s_per_core` (the pool's rate over
its processes: wall time, so on a loaded machine it counts the waits for a core), `decode_files_per_cpu_s` (files a
second of one busy core, from the in-process run's CPU time) and the decoding processes 100 files/s need at that rate,
and `decode_parent_cpu_ms_per_file`: what each file still costs the trainer's own process with a pool (fetching,
sending the bytes, unpickling the decoded batch, the log), whose inverse caps the intake whatever the cores.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
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
from protocol.rollouts import PROOF_BYTES, RolloutBatch, RolloutHeader, RolloutSample, encode_rollouts
from protocol.runspec import SamplingSpec
from protocol.submission import local_binding
from trainer.consumed_log import LINE
from trainer.decode_pool import default_workers

POOL = 1
META = EventMeta(block_number=1, block_hash=b"\0" * 32, tx_hash=b"\0" * 32, log_index=0, address="0x0")
CHUNK = 1 << 20
PROOF_CHUNK = 32
VOCAB = 32_000
DISTINCT_FILES = 4
"""Synthetic files made for the decode figure (served in turn): decoding the same bytes twice costs the same."""


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


def _new_head(_w3: object, _numbers=itertools.count(1)) -> dict:
    """A new block at each read, far past every challenge window: every poll reads the chain."""
    number = next(_numbers)
    return {"number": number, "hash": number.to_bytes(32, "big"), "timestamp": 2**40}


def _chain_fakes() -> dict:
    """The chain's side of `LedgerSource`: every submission accepted, its verdict final."""
    return {
        "EventCursor": _Cursor, "court_of": lambda *_: None,
        "pool_state": lambda *_: SimpleNamespace(challenge_window_s=0),
        "latest_block": _new_head,
        "get_work": lambda _ledger, _work_id: SimpleNamespace(status=WorkStatus.ACCEPTED, submitted_at=0),
    }


LEDGER = SimpleNamespace(deployment=SimpleNamespace(block=0), pool=None, w3=None, batches=None, logs=SimpleNamespace(page_blocks=10_000))


def measure(consumed: int, files_per_step: int, steps: int, folder: Path) -> dict:
    log = folder / "consumed.log"
    write_history(log, consumed)
    fakes = {
        **_chain_fakes(), "get_object": lambda _kubo, digest, timeout: digest,
        "decode_rollouts": lambda _data, batch=RolloutBatch.model_construct(): batch,  # built once, not timed
    }
    with mock.patch.multiple(ledger_source, **fakes):
        source = ledger_source.LedgerSource(LEDGER, kubo=None, pool_id=POOL, consumed_log=log)
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


def synthetic_file(tokens: int, seed: int) -> bytes:
    """A valid rollout file: 8 prompts × 16 completions of `tokens` random ids, proofs every 32 tokens."""
    rng = random.Random(seed)
    sampling = SamplingSpec(group_size=16, max_tokens=tokens)
    header = RolloutHeader.bound(local_binding("0x" + "11" * 20, 0, seed), manifest_digest="0x" + "00" * 32,
                                 task={"name": "synthetic"}, sampling=sampling, proof_chunk=PROOF_CHUNK)
    samples = []
    for group in range(8):
        prompt = [rng.randrange(1, VOCAB) for _ in range(100)]
        samples += [RolloutSample(
            group=group, sample=s, prompt_index=group, prompt_ids=prompt,
            completion_ids=[rng.randrange(1, VOCAB) for _ in range(tokens)],
            logprobs=[-rng.random() for _ in range(tokens)], reward=float(s % 2), finish_reason="length", seed=s,
            proofs=[rng.randbytes(PROOF_BYTES) for _ in range(-(-tokens // PROOF_CHUNK))]) for s in range(16)]
    return encode_rollouts(RolloutBatch(header=header, samples=samples))


def _decode_rate(files: list[bytes], count: int, workers: int) -> tuple[float, float]:
    """(files/s, CPU ms of this process a file) of one `LedgerSource.poll` taking `count` accepted files, decoded by
    `decode_workers` = `workers`, after an untimed poll of as many files as processes (it starts and warms them)."""
    served = itertools.cycle(files)
    with mock.patch.multiple(ledger_source, **_chain_fakes(), get_object=lambda _kubo, _digest, timeout: next(served)):
        source = ledger_source.LedgerSource(LEDGER, kubo=None, pool_id=POOL, decode_workers=workers)
        try:
            warm = max(1, workers)
            _Cursor.queued = [_events(0, warm), _events(warm, count)]
            assert len(source.poll()) == warm
            started, cpu_started = time.perf_counter(), time.process_time()
            items = source.poll()
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        finally:
            source.close()
    assert len(items) == count and not source.unreadable, f"decoded {len(items)} of {count}"
    return count / elapsed, 1e3 * cpu / count


def measure_decode(count: int, workers: int, tokens: int) -> dict:
    files = [synthetic_file(tokens, seed) for seed in range(DISTINCT_FILES)]
    serial, serial_cpu_ms = _decode_rate(files, count, 0)
    pooled, parent_cpu_ms = _decode_rate(files, count, workers)
    per_core = pooled / workers
    return {
        "decode_file_mb": round(statistics.mean(len(f) for f in files) / 1e6, 2), "decode_tokens": tokens,
        "decode_files": count, "decode_workers": workers,
        "decode_serial_files_per_s": round(serial, 1), "decode_serial_cpu_ms_per_file": round(serial_cpu_ms, 1),
        "decode_pool_files_per_s": round(pooled, 1), "decode_speedup": round(pooled / serial, 2),
        "decode_files_per_s_per_core": round(per_core, 1),
        "decode_files_per_cpu_s": round(1e3 / serial_cpu_ms, 1),
        "decode_cores_for_100_files_per_s": math.ceil(100 * serial_cpu_ms / 1e3),
        "decode_parent_cpu_ms_per_file": round(parent_cpu_ms, 1),
        "decode_parent_ceiling_files_per_s": round(1e3 / parent_cpu_ms),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.intake", description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumed", type=int, default=10_000_000, help="work ids consumed before (default 10 M)")
    parser.add_argument("--files-per-step", type=int, default=32, help="files the trainer consumes a step")
    parser.add_argument("--steps", type=int, default=20, help="steps measured")
    parser.add_argument("--decode-files", type=int, default=64, help="files decoded in each way (default 64)")
    parser.add_argument("--decode-workers", type=int, default=default_workers(),
                        help="decoding processes of the pool (default: one per core)")
    parser.add_argument("--decode-tokens", type=int, default=500,
                        help="tokens a completion of the synthetic files (default 500: ~1 MB a file)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    if args.decode_workers < 2:
        parser.error("--decode-workers must be at least 2 (fewer decode in process)")
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        result = measure(args.consumed, args.files_per_step, args.steps, Path(tmp))
    result |= measure_decode(args.decode_files, args.decode_workers, args.decode_tokens)
    print(f"trainer intake with {args.consumed:,} files consumed before, {args.files_per_step} a step; decoding "
          f"{args.decode_files} files of {result['decode_file_mb']:.2f} MB")
    rows = [
        ("ms per new event (median)", f"{result['trainer_ms_per_event']:.4f}"),
        ("ms per new event (worst step)", f"{result['trainer_ms_per_event_max']:.4f}"),
        ("  CPU ms (worst step)", f"{result['trainer_cpu_ms_per_event_max']:.4f}"),
        ("MB written per step", f"{result['trainer_state_mb_per_step']:.4f}"),
        ("resume: log read in s", f"{result['load_s']:.2f}"),
        ("consumed.log MB", f"{result['log_mb']:.1f}"),
        ("peak RSS MB", str(result["peak_rss_mb"])),
        ("decode: files/s in process", f"{result['decode_serial_files_per_s']:.1f}"),
        (f"decode: files/s, {args.decode_workers} processes", f"{result['decode_pool_files_per_s']:.1f}"),
        ("decode: pool ÷ in process", f"{result['decode_speedup']:.2f}"),
        ("decode: files/s a core (pool wall time)", f"{result['decode_files_per_s_per_core']:.1f}"),
        ("decode: files a CPU second", f"{result['decode_files_per_cpu_s']:.1f}"),
        ("decode: processes for 100 files/s", str(result["decode_cores_for_100_files_per_s"])),
        ("decode: trainer process CPU ms a file", f"{result['decode_parent_cpu_ms_per_file']:.1f}"),
        ("decode: trainer process ceiling, files/s", str(result["decode_parent_ceiling_files_per_s"])),
    ]
    print_rows(rows, result, args, "intake")
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
