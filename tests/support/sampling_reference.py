"""An independent reference of sampling rule v3 (proofs/sampling.py's docstring, docs/protocol.md), written
from the specification alone: the seed's HMAC, pure-Python Philox4x32-10 for the known-answer vectors and a
numpy uint64 version for bulk comparisons. Nothing of proofs.sampling is imported."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np

_MASK = 0xFFFFFFFF


def seed(pool_seed: bytes, worker: str, seed_block_hash: bytes, nonce: int, rows: int, row: int) -> int:
    """First 63 bits (big-endian) of HMAC-SHA256(key = pool seed, msg = "proofswarm/sampling-seed/v2" ‖ worker
    address (20 B) ‖ seed block hash (32 B) ‖ nonce × rows + row (u64 BE))."""
    message = (b"proofswarm/sampling-seed/v2" + bytes.fromhex(worker[2:]) + seed_block_hash
               + (nonce * rows + row).to_bytes(8, "big"))
    return int.from_bytes(hmac.new(pool_seed, message, hashlib.sha256).digest()[:8], "big") >> 1


def philox4x32_10(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_index in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _MASK, (p0 >> 32) ^ c3 ^ k1, p0 & _MASK
        k0 = (k0 + 0x9E3779B9) & _MASK
        k1 = (k1 + 0xBB67AE85) & _MASK
    return c0, c1, c2, c3


def word(seed: int, position: int, token: int) -> int:
    """x(s, i, v) in pure Python."""
    if not 0 <= position < 2**32:
        raise ValueError("a position is one counter word: 0 <= i < 2^32")
    return philox4x32_10((token // 4, position, 0, 0), (seed & _MASK, seed >> 32))[token % 4]


def words_np(seeds: np.ndarray, positions: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """x(s, i, v) for arrays of triples (uint64 arithmetic: products exact, no wrapping)."""
    if positions.size and (positions.min() < 0 or positions.max() >= 2**32):
        raise ValueError("a position is one counter word: 0 <= i < 2^32")
    mask = np.uint64(_MASK)
    shift = np.uint64(32)
    c0 = tokens.astype(np.uint64) >> np.uint64(2)
    c1 = positions.astype(np.uint64)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0 = seeds.astype(np.uint64) & mask
    k1 = seeds.astype(np.uint64) >> shift
    for _ in range(10):
        p0 = c0 * np.uint64(0xD2511F53)
        p1 = c2 * np.uint64(0xCD9E8D57)
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ k0, p1 & mask, (p0 >> shift) ^ c3 ^ k1, p0 & mask
        k0 = (k0 + np.uint64(0x9E3779B9)) & mask
        k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    lanes = np.stack([c0, c1, c2, c3], axis=-1)
    return np.take_along_axis(lanes, (tokens.astype(np.int64) % 4)[..., None], axis=-1)[..., 0]


def uniforms_np(words: np.ndarray) -> np.ndarray:
    """w = min(fl32(fl32(x) * 2^-32 + 2^-33), 1 - 2^-24) in float32."""
    w = words.astype(np.float32) * np.float32(2.0**-32) + np.float32(2.0**-33)
    return np.minimum(w, np.float32(1.0 - 2.0**-24))


def gumbel_np(uniforms: np.ndarray) -> np.ndarray:
    """g = -log(-log1p(-w)) in float32."""
    return -np.log(-np.log1p(-uniforms))
