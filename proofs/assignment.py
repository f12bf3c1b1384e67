"""Prompt assignment: which dataset prompts a worker must answer in its `nonce`-th submission.

A keyed PRF, recomputable by anyone who knows the pool seed:

    block_j = HMAC-SHA256(key=pool_seed,
                          msg="proofswarm/assign/v2" || address (20 B) || nonce (u64 BE) || j (u32 BE))

The policy step is deliberately not an input: the chain fixes the nonce (each used once, in order),
so a worker cannot pick a step, or anything else, to grind for prompts it likes.

Each 32-byte block yields four 64-bit big-endian draws r. A draw is turned into an index by
rejection sampling (r is used only if r < 2^64 - (2^64 mod N), then index = r mod N, so there
is no modulo bias); indices already chosen are skipped, so the n indices are distinct and in
draw order.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from proofs.sampling import normalize_address

_ASSIGN_DOMAIN = b"proofswarm/assign/v2"


class AssignmentError(ValueError):
    """Invalid assignment request (e.g. more prompts than the dataset holds)."""


def assign_prompts(pool_seed: bytes, worker: str, nonce: int, dataset_size: int, n: int) -> list[int]:
    """The n distinct dataset indices assigned to `worker`'s `nonce`-th submission."""
    if dataset_size < 1:
        raise AssignmentError("dataset_size must be positive")
    if not 0 <= n <= dataset_size:
        raise AssignmentError(f"cannot assign {n} distinct prompts from {dataset_size}")
    if not 0 <= nonce < 2**64:
        raise AssignmentError("nonce must be a uint64")
    prefix = _ASSIGN_DOMAIN + normalize_address(worker) + struct.pack(">Q", nonce)
    limit = 2**64 - (2**64 % dataset_size)
    chosen: list[int] = []
    seen: set[int] = set()
    block = 0
    while len(chosen) < n:
        digest = hmac.new(pool_seed, prefix + struct.pack(">I", block), hashlib.sha256).digest()
        block += 1
        for offset in range(0, 32, 8):
            draw = int.from_bytes(digest[offset : offset + 8], "big")
            if draw >= limit:
                continue
            index = draw % dataset_size
            if index not in seen:
                seen.add(index)
                chosen.append(index)
                if len(chosen) == n:
                    break
    return chosen


def check_assignment(
    claimed: list[int],
    pool_seed: bytes,
    worker: str,
    nonce: int,
    dataset_size: int,
) -> bool:
    """Whether `claimed` is exactly the assignment for (worker, nonce), in order."""
    if len(claimed) > dataset_size:
        return False
    return claimed == assign_prompts(pool_seed, worker, nonce, dataset_size, len(claimed))
