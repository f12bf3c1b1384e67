"""Which completions of a rollout file get the expensive checks (spot checks, docs/protocol.md).

A pool's `spotCheckBps` is q in basis points. Of a file's n completions, m = ceil(q·n) are
checked with prefill, TOPLOC, sampling replay and termination; every completion gets
the cheap checks. The m indices are drawn without replacement from

    randomness = keccak256(blockhash(B + 1) ‖ workId)

where B is the block of the submission's `WorkSubmitted` event: a block that does not exist
when the worker submits. Anyone holding the block hash and the work id re-derives the indices
(`spot_check_indices`); a challenge's evidence carries both.

Draw: a partial Fisher–Yates shuffle of 0…n−1, position i swapped with i + u_i, where u_i is
uniform in [0, n − i) by rejection from the 256-bit words keccak256(randomness ‖ uint64 counter).
A pool whose run spec sets a floor of checked tokens (`verification.min_checked_tokens`) takes the
shuffle further, one completion at a time in the same order, until the drawn completions hold at
least the floor's tokens (or all n are drawn): the first m are the same with or without a floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

from eth_utils import keccak

MAX_BPS = 10_000
"""q = 1: every completion is checked (no randomness needed)."""
_WORD = 2**256


def spot_check_count(n: int, bps: int) -> int:
    """m = ceil(n · bps / 10000): how many of a file's n completions get the expensive checks."""
    if not 0 < bps <= MAX_BPS:
        raise ValueError(f"spot-check bps must be in (0, {MAX_BPS}], got {bps}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return (n * bps + MAX_BPS - 1) // MAX_BPS


def spot_check_randomness(block_hash: bytes, work_id: bytes) -> bytes:
    """keccak256(blockhash(submission block + 1) ‖ workId): 32 bytes fixed after submission."""
    if len(block_hash) != 32 or len(work_id) != 32:
        raise ValueError("block hash and work id are 32 bytes each")
    return keccak(bytes(block_hash) + bytes(work_id))


def _uniform_below(randomness: bytes, counter: int, bound: int) -> tuple[int, int]:
    """A uniform integer in [0, bound) and the next unused counter (rejection sampling, no modulo bias)."""
    limit = _WORD - _WORD % bound
    while True:
        word = int.from_bytes(keccak(randomness + counter.to_bytes(8, "big")), "big")
        counter += 1
        if word < limit:
            return word % bound, counter


def spot_check_indices(randomness: bytes | None, n: int, bps: int, completion_tokens: Sequence[int] | None = None,
                       min_checked_tokens: int = 0) -> list[int]:
    """The sorted indices of the completions to check, drawn without replacement from `randomness` (which may be
    None only when every completion is checked): the first m = spot_check_count(n, bps) of the shuffle, then, while
    the drawn completions hold fewer than `min_checked_tokens` of `completion_tokens` (each completion's token
    count), the shuffle's next ones. A file holding no more than the floor is checked whole."""
    m = spot_check_count(n, bps)
    if min_checked_tokens < 0:
        raise ValueError(f"min_checked_tokens must be >= 0, got {min_checked_tokens}")
    if min_checked_tokens and (completion_tokens is None or len(completion_tokens) != n):
        raise ValueError("a floor of checked tokens needs every completion's token count")
    if m >= n or (min_checked_tokens and sum(completion_tokens) <= min_checked_tokens):
        return list(range(n))
    if randomness is None or len(randomness) != 32:
        raise ValueError("a spot check of fewer than all completions needs 32 bytes of randomness")
    moved: dict[int, int] = {}  # the shuffle's positions that hold another index than their own (work ∝ draws, not n)
    chosen: list[int] = []
    counter = checked = 0
    while len(chosen) < m or checked < min_checked_tokens:
        i = len(chosen)
        j, counter = _uniform_below(bytes(randomness), counter, n - i)
        pick = moved.get(i + j, i + j)
        moved[i + j] = moved.get(i, i)
        chosen.append(pick)
        if min_checked_tokens:
            checked += completion_tokens[pick]
    return sorted(chosen)


def detection_probability(n: int, m: int, fabricated: int) -> float:
    """Hypergeometric: the probability that m of n completions, drawn without replacement, include at
    least one of `fabricated` bad ones: 1 − C(n − f, m) / C(n, m)."""
    if not (0 <= m <= n and 0 <= fabricated <= n):
        raise ValueError("need 0 ≤ m ≤ n and 0 ≤ fabricated ≤ n")
    return 1.0 - comb(n - fabricated, m) / comb(n, m)


def min_slash(bps: int, reward_per_sample: int, max_samples_per_work: int) -> int:
    """The least slash `ComputePool.createPool` accepts at spot-check fraction bps / 10000:
    ceil((10000 − bps) × rewardPerSample × maxSamplesPerWork / bps), and at least 1."""
    spot_check_count(1, bps)  # validates bps
    gain = (MAX_BPS - bps) * reward_per_sample * max_samples_per_work
    return max(1, -(-gain // bps))
