"""The batch list: what a posted batch's `listDigest` names on IPFS (docs/protocol.md R3.8) — each signed run's
worker, first counter, compact signature and leaves — so that anyone rebuilds each run's leaves root, the run's
EIP-712 digest, its node and the batch's root (ledger_client.chain.batches.runs_of_list), and a validator fetches and
checks each leaf's file.

Canonical bytes (one encoding per list, so that a worker that posts the same runs again gets the same digest and
batch id), big-endian, fixed width:

    "PSBL" version:u8 pool_id:u256 epoch:u32 attempt:u32 runs:u16
    per run:  worker:20 first_counter:u32 count:u32 r:32 vs:32
              count × (rollout_digest:32 step:u64 samples:u32)

`attempt` tells apart two lists of the same runs (a batch voided as unavailable is posted again under another id).
A list is hostile bytes: `decode_batch_list` bounds every count before it reads (at most `MAX_LIST_BYTES`, one IPFS
block; `MAX_BATCH` runs; `MAX_RUN_LEAVES` leaves a run), refuses trailing bytes, and raises `BatchListError` naming
what is wrong.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from eth_utils import to_checksum_address

from protocol.errors import InvalidInput

MAGIC = b"PSBL"
VERSION = 1
MAX_LIST_BYTES = 1024 * 1024
"""One raw IPFS block (ledger_client.ipfs.content.MAX_OBJECT_BYTES): about 23,000 leaves."""
MAX_BATCH = 1_024
"""Most runs a batch holds (`WorkBatches.MAX_BATCH`)."""
MAX_RUN_LEAVES = 4_096
"""Most leaves a run holds (`WorkBatches.MAX_LEAVES`)."""

_HEAD = struct.Struct(">4sB32sIIH")
_RUN = struct.Struct(">20sII32s32s")
_LEAF = struct.Struct(">32sQI")


class BatchListError(InvalidInput):
    """Bytes that are not a well-formed batch list (a validator voids the batch: R3.8)."""


class ListedLeaf(NamedTuple):
    """`IWorkBatches.LeafBody`: the file's digest (sha256 of its raw block), its policy step and its samples."""

    rollout_digest: bytes
    step: int
    samples: int


class ListedRun(NamedTuple):
    worker: str
    first_counter: int
    leaves: tuple[ListedLeaf, ...]
    r: bytes
    vs: bytes


class BatchList(NamedTuple):
    pool_id: int
    epoch: int
    runs: tuple[ListedRun, ...]
    attempt: int = 0


def encode_batch_list(bl: BatchList) -> bytes:
    """The list's canonical bytes (ValueError for a list no decoder would take back)."""
    if not 1 <= len(bl.runs) <= MAX_BATCH:
        raise ValueError(f"a batch list holds 1..{MAX_BATCH} runs, not {len(bl.runs)}")
    out = [_HEAD.pack(MAGIC, VERSION, bl.pool_id.to_bytes(32, "big"), bl.epoch, bl.attempt, len(bl.runs))]
    for run in bl.runs:
        if not 1 <= len(run.leaves) <= MAX_RUN_LEAVES or run.first_counter + len(run.leaves) > 2**32:
            raise ValueError(f"a run holds 1..{MAX_RUN_LEAVES} leaves of 32-bit counters")
        out.append(_RUN.pack(bytes.fromhex(to_checksum_address(run.worker)[2:]), run.first_counter, len(run.leaves),
                             run.r, run.vs))
        out += [_LEAF.pack(bytes(leaf.rollout_digest), leaf.step, leaf.samples) for leaf in run.leaves]
    data = b"".join(out)
    if len(data) > MAX_LIST_BYTES:
        raise ValueError(f"a batch list of {len(data)} bytes exceeds {MAX_LIST_BYTES}: post fewer runs a batch")
    return data


def decode_batch_list(data: bytes) -> BatchList:
    """The list `data` encodes; BatchListError for anything but canonical bytes within the bounds."""
    if len(data) > MAX_LIST_BYTES:
        raise BatchListError(f"batch list of {len(data)} bytes exceeds {MAX_LIST_BYTES}")
    if len(data) < _HEAD.size:
        raise BatchListError(f"batch list of {len(data)} bytes is shorter than its {_HEAD.size}-byte header")
    magic, version, pool, epoch, attempt, n_runs = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise BatchListError(f"not a batch list (starts {magic!r}, not {MAGIC!r})")
    if version != VERSION:
        raise BatchListError(f"batch list version {version}; this client reads version {VERSION}")
    if not 1 <= n_runs <= MAX_BATCH:
        raise BatchListError(f"batch list declares {n_runs} runs, not 1..{MAX_BATCH}")
    at, runs = _HEAD.size, []
    for i in range(n_runs):
        if at + _RUN.size > len(data):
            raise BatchListError(f"batch list ends inside run {i}'s header")
        worker, first, count, r, vs = _RUN.unpack_from(data, at)
        at += _RUN.size
        if not 1 <= count <= MAX_RUN_LEAVES:
            raise BatchListError(f"run {i} declares {count} leaves, not 1..{MAX_RUN_LEAVES}")
        if first + count > 2**32:
            raise BatchListError(f"run {i}'s counters {first}+{count} overflow 32 bits")
        if at + count * _LEAF.size > len(data):
            raise BatchListError(f"batch list ends inside run {i}'s {count} leaves")
        leaves = tuple(ListedLeaf(*_LEAF.unpack_from(data, at + k * _LEAF.size)) for k in range(count))
        at += count * _LEAF.size
        runs.append(ListedRun(to_checksum_address(worker), first, leaves, r, vs))
    if at != len(data):
        raise BatchListError(f"{len(data) - at} bytes after the batch list's last run")
    return BatchList(int.from_bytes(pool, "big"), epoch, tuple(runs), attempt)
