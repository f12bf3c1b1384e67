"""TOPLOC: locality-sensitive proofs of inference (arXiv 2501.16007), reference encoding.

Prover: the final hidden states of the generated tokens (the LM head's input, cast to bf16)
are cut into chunks of `chunk` tokens (the last chunk takes what remains). For each chunk the
`topk` entries of largest magnitude of the flattened (tokens x hidden) tensor are taken as
points (x = flat index, y = raw bf16 bit pattern). x is reduced modulo the largest m <= 65497
under which the indices stay distinct, and the unique polynomial of degree < topk through the
points is interpolated over GF(65497). A proof is the modulus as 2 big-endian bytes followed by
the topk monomial coefficients (ascending powers) as 2 big-endian bytes each: 258 bytes for
topk = 128. This is byte-for-byte the encoding of the reference implementation.

Verifier: recompute the hidden states by one prefill, take the verifier's own top-k of each
chunk, evaluate the proof polynomial at those indices and compare bf16 exponents and mantissas.

Extension of the reference for small chunks: when a chunk has fewer than `topk` entries (a
short last chunk of a model with a small hidden size), every entry is a point and the
coefficient list is zero-padded to `topk`, so every proof still has 2 + 2*topk bytes.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from proofs.toploc_thresholds import COUNTED_FROM_TOKENS, DEFAULT_TOPK, MISSING_STAT, PAPER_THRESHOLDS, Thresholds

GF_PRIME = 65497
"""The prime field of the interpolation (the largest prime below 2**16 - 38, as in the paper)."""
DEFAULT_CHUNK = 32

_BF16_EXP_MASK = 0x7F80
_BF16_EXP_SHIFT = 7
_BF16_MANT_MASK = 0x007F


class ProofFormatError(ValueError):
    """A proof is malformed or the proof list does not fit the hidden states."""


@dataclass(frozen=True)
class ChunkResult:
    """Comparison of one proof against the verifier's recomputed activations."""

    exp_mismatches: int
    mant_err_mean: float
    mant_err_median: float
    n_points: int = DEFAULT_TOPK
    mant_err_max: float = 0.0
    """The largest mantissa error among the exponent-matching points."""
    n_tokens: int = 0
    """Tokens in the chunk (its hidden-state rows); 0 where unknown."""

    def mean_without_max(self) -> float:
        """The mean mantissa error with the single largest one left out (0 with fewer than two points)."""
        matched = self.n_points - self.exp_mismatches
        if self.mant_err_mean == MISSING_STAT:
            return MISSING_STAT
        if matched < 2:
            return 0.0
        return max(0.0, (self.mant_err_mean * matched - self.mant_err_max) / (matched - 1))




def chunk_passes(result: ChunkResult, thresholds: Thresholds = PAPER_THRESHOLDS) -> bool:
    """Whether one chunk is within the thresholds (its point count's calibrated limits where there are some)."""
    mean = result.mean_without_max() if thresholds.mean_excludes_max else result.mant_err_mean
    limits = thresholds.for_tokens(result.n_tokens) if result.n_tokens else None
    if limits is not None:
        return (result.exp_mismatches <= limits.max_exp_mismatches and mean <= limits.max_mant_err_mean
                and result.mant_err_median <= limits.max_mant_err_median)
    needed = math.ceil(thresholds.min_exp_matches * result.n_points / thresholds.per_points)
    return (
        result.n_points - result.exp_mismatches >= needed
        and mean <= thresholds.max_mant_err_mean
        and result.mant_err_median <= thresholds.max_mant_err_median
    )


def failing_chunks(
    results: list[ChunkResult], thresholds: Thresholds = PAPER_THRESHOLDS
) -> list[int]:
    """Indices of the chunks outside the thresholds."""
    return [i for i, r in enumerate(results) if not chunk_passes(r, thresholds)]


def accept(results: list[ChunkResult], thresholds: Thresholds = PAPER_THRESHOLDS) -> bool:
    """A completion's proofs are accepted when every chunk passes."""
    return not failing_chunks(results, thresholds)


COUNT_TEST_LAMBDAS = tuple(float(2**k) for k in range(-4, 7))
"""λ grid over which the chunk-count test's Chernoff bound is minimised (a bound at any λ is valid)."""


@dataclass(frozen=True)
class ChunkCountTest:
    """A file's TOPLOC chunk-count test: how many of its checked chunks have a mantissa-error mean above their
    length's calibrated `exceed_mean`, against the honest rates (Chernoff bound on the count)."""

    passed: bool
    chunks: int
    exceeding: int
    expected: float
    """The count an honest file of these chunks stays below on average (the sum of their honest rates' bounds)."""
    log_p_value: float
    false_positive_rate: float


def count_evidence(results: Sequence[ChunkResult], thresholds: Thresholds,
                   key_of: Callable[[int], str] | None = None) -> list[tuple[bool, float, str]]:
    """Per chunk of at least COUNTED_FROM_TOKENS tokens whose length has a calibrated level
    (`ChunkLimits.exceed_mean`): whether its mantissa-error mean
    exceeds it, the honest rate of that (`exceed_rate`), and the chunk's key (`key_of(i)`, asked only for the chunks
    counted; else its index): chunks with one key are one measurement (`chunk_key`); the input of
    `chunk_count_test`."""
    counted = []
    for i, r in enumerate(results):
        limits = thresholds.for_tokens(r.n_tokens) if r.n_tokens >= COUNTED_FROM_TOKENS else None
        if limits is not None and limits.exceed_mean is not None:
            mean = r.mean_without_max() if thresholds.mean_excludes_max else r.mant_err_mean
            counted.append((mean > limits.exceed_mean, limits.exceed_rate, str(i) if key_of is None else key_of(i)))
    return counted


def chunk_key(prompt_ids: Sequence[int], completion_ids: Sequence[int], index: int, chunk: int = DEFAULT_CHUNK) -> str:
    """What chunk `index` of a completion's hidden states is a function of: the prompt, the completion's tokens
    before the chunk's last one, and the chunk's length. Completions of one prompt share their first chunk's
    hidden states exactly when they share those tokens (every 1-token completion of a prompt does): the same
    measurement, counted once."""
    end = min((index + 1) * chunk, len(completion_ids))
    data = struct.pack(f">{len(prompt_ids)}qq{end - 1}q", *prompt_ids, -1, *completion_ids[: end - 1])
    return hashlib.blake2b(data + struct.pack(">q", end - index * chunk), digest_size=12).hexdigest()


def chunk_count_test(counted: Sequence[tuple[bool, float, str]],
                     false_positive_rate: float) -> ChunkCountTest | None:
    """Test a file's checked chunks together (`count_evidence` of each; a key seen twice counts once). Each chunk
    passes its own limits at a per-chunk rate that keeps the file's honest rate at `false_positive_rate`, so a
    worker whose hidden states are a little off everywhere — int8 weights, a perturbed layer, shipping its own
    model's proofs — passes them chunk by chunk; but its chunks exceed the honest 90 % level of their length far
    more often than honest ones (~0.86 against ~0.08 at a bf16 profile, docs/notes/attacks.md). With q_c ≥ P(honest
    chunk c exceeds), the count K of n independent chunks has P(K ≥ k) ≤ exp(min_λ Σ_c log(1 − q_c + q_c·e^λ) −
    λk); the file fails below the rate. None when no chunk's length has a calibrated level (the fp32 profile: its
    limits are already tight)."""
    counted = list({key: (exceeds, q) for exceeds, q, key in reversed(counted)}.values())
    if not counted:
        return None
    k = sum(exceeds for exceeds, _ in counted)

    def log_bound(lam: float) -> float:  # log(1 − q + q·e^λ) = λ + log(q + (1 − q)·e^−λ), stable for large λ
        return sum(lam + math.log(q + (1 - q) * math.exp(-lam)) if q > 0 else 0.0 for _, q in counted) - lam * k

    log_p = min(0.0, min(log_bound(lam) for lam in COUNT_TEST_LAMBDAS)) if k else 0.0
    return ChunkCountTest(passed=log_p > math.log(false_positive_rate), chunks=len(counted), exceeding=k,
                          expected=sum(q for _, q in counted), log_p_value=log_p,
                          false_positive_rate=false_positive_rate)


def proof_size(topk: int = DEFAULT_TOPK) -> int:
    """Bytes per proof: 2 for the modulus plus 2 per coefficient."""
    return 2 + 2 * topk


def n_chunks(n_tokens: int, chunk: int = DEFAULT_CHUNK) -> int:
    """Number of proofs for a completion of n_tokens."""
    return -(-n_tokens // chunk)


# ---- GF(65497) arithmetic (vectorised over chunks with numpy) ------------------------------


@lru_cache(maxsize=1)
def _inverse_table() -> np.ndarray:
    """inv[a] = a^(p-2) mod p for every a in GF(p); inv[0] = 0 (never used)."""
    base = np.arange(GF_PRIME, dtype=np.int64)
    result = np.ones(GF_PRIME, dtype=np.int64)
    exponent = GF_PRIME - 2
    while exponent:
        if exponent & 1:
            result = result * base % GF_PRIME
        base = base * base % GF_PRIME
        exponent >>= 1
    result[0] = 0
    return result


@lru_cache(maxsize=1)
def _inverse_table_u32() -> np.ndarray:
    """`_inverse_table` as uint32, for `_interpolate`."""
    return _inverse_table().astype(np.uint32)


def _injective_modulus(x: np.ndarray) -> int:
    """Largest m <= GF_PRIME for which the values of x are pairwise distinct mod m."""
    if int(x.max()) < GF_PRIME:
        return GF_PRIME
    for m in range(GF_PRIME, 0, -1):
        if np.unique(x % m).size == x.size:
            return m
    raise ProofFormatError("no injective modulus found")  # unreachable for distinct x


def _interpolate(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Monomial coefficients (ascending) of the polynomials through (x[c], y[c]) over GF(p).

    x, y: int64 [chunks, k], x in [0, p) and distinct within a row. Newton divided
    differences, then expansion of the Newton form, both O(k^2) and vectorised over rows.
    The arithmetic is in uint32: every operand is reduced below p before a product, and
    (p - 1)^2 < 2^32, so nothing wraps; against int64 it moves half the bytes and reduces with
    32-bit division (500 rows of k = 128: 98 → 71 ms of CPU; the proofs were a sixth of a CPU
    worker's time in bench.protocol).
    """
    p = np.uint32(GF_PRIME)
    inv = _inverse_table_u32()
    k = x.shape[1]
    dd = (y % GF_PRIME).astype(np.uint32)
    for j in range(1, k):
        # x differences lie in (-p, p) \ {0}; a negative index d reads inv[p + d] = 1/d mod p
        step = dd[:, j:] + (p - dd[:, j - 1 : -1])  # the difference, kept unsigned: below 2p
        step %= p
        step *= inv[x[:, j:] - x[:, :-j]]
        step %= p
        dd[:, j:] = step
    coeffs = np.zeros_like(dd)
    coeffs[:, 0] = dd[:, k - 1]
    minus_x = (p - x.astype(np.uint32)) % p
    for degree, i in enumerate(range(k - 2, -1, -1), start=1):
        # multiply by (X - x_i), then add the Newton coefficient; only degree + 1 terms are live
        live = coeffs[:, : degree + 1]
        product = minus_x[:, i : i + 1] * live
        product %= p
        product[:, 1:] += live[:, :-1]
        product[:, 0] += dd[:, i]
        product %= p
        coeffs[:, : degree + 1] = product
    return coeffs.astype(np.int64)


def _evaluate(coeffs: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Horner evaluation over GF(p): coeffs [chunks, K], points [chunks, k] -> [chunks, k]."""
    p = GF_PRIME
    acc = np.repeat(coeffs[:, -1:], points.shape[1], axis=1)
    for m in range(coeffs.shape[1] - 2, -1, -1):
        acc = (acc * points + coeffs[:, m : m + 1]) % p
    return acc


# ---- chunking and top-k ---------------------------------------------------------------------


def _as_bf16(hidden: torch.Tensor) -> torch.Tensor:
    if hidden.dim() != 2:
        raise ProofFormatError(
            f"hidden states must be [n_tokens, d], got shape {tuple(hidden.shape)}"
        )
    return hidden.detach().to(device="cpu", dtype=torch.bfloat16).contiguous()


def _chunk_topk(
    hidden_bf16: torch.Tensor, chunk: int, topk: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per chunk: (flat indices, bf16 bit patterns) of the top-k entries by magnitude."""
    points = []
    for start in range(0, hidden_bf16.shape[0], chunk):
        flat = hidden_bf16[start : start + chunk].reshape(-1)
        k = min(topk, flat.numel())
        idx = flat.abs().topk(k).indices
        bits = flat[idx].view(torch.uint16).to(torch.int64)
        points.append((idx.numpy(), bits.numpy()))
    return points


def _group_by_size(items: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, (idx, _) in enumerate(items):
        groups.setdefault(idx.size, []).append(i)
    return groups


# ---- public API ------------------------------------------------------------------------------


def build_proofs(
    hidden: torch.Tensor, chunk: int = DEFAULT_CHUNK, topk: int = DEFAULT_TOPK
) -> list[bytes]:
    """TOPLOC proofs for the hidden states [n_tokens, d] of one completion's generated tokens.

    Returns one proof of 2 + 2*topk bytes per chunk of `chunk` tokens; [] for no tokens.
    Float32 inputs are cast to bf16 first (the proof commits to the bf16 values).
    """
    return build_proofs_batch([hidden], chunk, topk)[0]


def build_proofs_batch(
    hiddens: Sequence[torch.Tensor], chunk: int = DEFAULT_CHUNK, topk: int = DEFAULT_TOPK
) -> list[list[bytes]]:
    """`build_proofs` for many completions at once (one vectorised interpolation)."""
    if chunk <= 0 or topk <= 0:
        raise ValueError("chunk and topk must be positive")
    if topk > 0xFFFF:
        raise ValueError("topk must fit the 2-byte encoding")
    points: list[tuple[np.ndarray, np.ndarray]] = []
    owners: list[int] = []
    for owner, hidden in enumerate(hiddens):
        hidden_bf16 = _as_bf16(hidden)
        if hidden_bf16.shape[0] and hidden_bf16.shape[1] == 0:
            raise ProofFormatError("hidden size is zero")
        chunk_points = _chunk_topk(hidden_bf16, chunk, topk)
        points += chunk_points
        owners += [owner] * len(chunk_points)
    encoded: list[bytes] = [b""] * len(points)
    for k, members in _group_by_size(points).items():
        moduli = np.array([_injective_modulus(points[i][0]) for i in members], dtype=np.int64)
        x = np.stack([points[i][0] for i in members]) % moduli[:, None]
        y = np.stack([points[i][1] for i in members])
        coeffs = np.zeros((len(members), topk), dtype=np.int64)
        coeffs[:, :k] = _interpolate(x, y)
        header = moduli.astype(">u2").reshape(-1, 1).view(np.uint8)
        body = coeffs.astype(">u2").view(np.uint8)
        rows = np.concatenate([header, body], axis=1)
        for row, i in enumerate(members):
            encoded[i] = rows[row].tobytes()
    proofs: list[list[bytes]] = [[] for _ in hiddens]
    for owner, proof in zip(owners, encoded):
        proofs[owner].append(proof)
    return proofs


def decode_proof(proof: bytes, topk: int = DEFAULT_TOPK) -> tuple[int, list[int]]:
    """(modulus, coefficients) of one proof; ProofFormatError when it is malformed."""
    if len(proof) != proof_size(topk):
        raise ProofFormatError(f"proof has {len(proof)} bytes, expected {proof_size(topk)}")
    values = np.frombuffer(proof, dtype=">u2").astype(np.int64)
    modulus, coeffs = int(values[0]), values[1:]
    if not 0 < modulus <= GF_PRIME:
        raise ProofFormatError(f"proof modulus {modulus} is outside 1..{GF_PRIME}")
    if int(coeffs.max()) >= GF_PRIME:
        raise ProofFormatError("proof coefficient outside GF(65497)")
    return modulus, coeffs.tolist()


def _fp_parts(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (bits & _BF16_EXP_MASK) >> _BF16_EXP_SHIFT, bits & _BF16_MANT_MASK


def verify_proofs(
    hidden: torch.Tensor,
    proofs: list[bytes],
    chunk: int = DEFAULT_CHUNK,
    topk: int = DEFAULT_TOPK,
) -> list[ChunkResult]:
    """Compare proofs against recomputed hidden states [n_tokens, d]; one result per chunk.

    Raises ProofFormatError when a proof is malformed or the number of proofs does not match
    the number of chunks of the hidden states.
    """
    result = verify_proofs_batch([hidden], [proofs], chunk, topk)[0]
    if isinstance(result, ProofFormatError):
        raise result
    return result


def verify_proofs_batch(
    hiddens: Sequence[torch.Tensor],
    proofs: Sequence[list[bytes]],
    chunk: int = DEFAULT_CHUNK,
    topk: int = DEFAULT_TOPK,
) -> list[list[ChunkResult] | ProofFormatError]:
    """`verify_proofs` for many completions at once: every chunk of every completion is evaluated in one
    vectorised Horner pass per point count (a file's 128 one-chunk completions cost about one call, not 128).
    Per completion, its chunk results or the ProofFormatError `verify_proofs` would raise."""
    if len(hiddens) != len(proofs):
        raise ValueError("one proof list per hidden-state tensor")
    out: list[list[ChunkResult] | ProofFormatError] = [[] for _ in hiddens]
    points: list[tuple[np.ndarray, np.ndarray]] = []
    decoded: list[tuple[int, list[int]]] = []
    owners: list[tuple[int, int]] = []  # (completion, the chunk's token count) per chunk
    for owner, (hidden, own_proofs) in enumerate(zip(hiddens, proofs)):
        try:
            hidden_bf16 = _as_bf16(hidden)
            expected = n_chunks(hidden_bf16.shape[0], chunk)
            if len(own_proofs) != expected:
                raise ProofFormatError(f"{len(own_proofs)} proofs for {expected} chunks")
            own_decoded = [decode_proof(p, topk) for p in own_proofs]
        except ProofFormatError as exc:
            out[owner] = exc
            continue
        if expected == 0:
            continue
        points += _chunk_topk(hidden_bf16, chunk, topk)
        decoded += own_decoded
        n_tokens = hidden_bf16.shape[0]
        owners += [(owner, min(chunk, n_tokens - j * chunk)) for j in range(expected)]
    results: list[ChunkResult] = [ChunkResult(0, 0.0, 0.0)] * len(points)
    for k, members in _group_by_size(points).items():
        moduli = np.array([decoded[i][0] for i in members], dtype=np.int64)
        coeffs = np.array([decoded[i][1] for i in members], dtype=np.int64)
        x = np.stack([points[i][0] for i in members]) % moduli[:, None]
        claimed = _evaluate(coeffs, x)
        claimed_exp, claimed_mant = _fp_parts(claimed)
        own_exp, own_mant = _fp_parts(np.stack([points[i][1] for i in members]))
        mismatches = claimed_exp != own_exp
        all_errors = np.abs(claimed_mant - own_mant)
        for row, i in enumerate(members):
            mismatch = mismatches[row]
            errors = all_errors[row][~mismatch]
            if errors.size:
                mean, median = float(errors.mean()), float(statistics.median(errors.tolist()))
                largest = float(errors.max())
            else:
                mean = median = largest = MISSING_STAT
            results[i] = ChunkResult(int(mismatch.sum()), mean, median, k, largest, owners[i][1])
    for (owner, _), result in zip(owners, results):
        out[owner].append(result)  # in chunk order: a completion's chunks were added in order
    return out
