"""Exact mode: a Llama/Qwen2-style policy computed in integers end to end (docs/protocol.md, "Exact mode").

`quantise_policy` turns a float Hugging Face model into an `ExactPolicy` (int8 weight rows with a 15-bit
multiplier and a shift each, Q16 embeddings and norm weights, integer RoPE frequencies); `ExactPolicy.forward`
runs it on integers only (int8 GEMMs whose sums stay below 2^30, with torch._int_mm on CUDA; on the CPU the GEMMs,
attention products and several quotients run in float64 or float32 wherever docs/protocol.md R5.6 proves them
exact, the rest in int64 tensor ops, exp's polynomial and SiLU from tables of their own integers), so every machine
computes the same Q16 logits bit for bit; `generate` samples from them with the fixed-point Gumbel-max rule (the
integer noise computed only for rows a float64 estimate cannot decide). Every bound the spec states is
checked where it matters and raises `ExactOverflowError`.
tests/support/exact_reference.py re-implements the spec in numpy; the two agree bit for bit.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache, cached_property
from typing import TypeVar

import torch

from inference.backend import InferenceError
from proofs.sampling import noise_words
from protocol.runspec import POSITION_LIMIT

FRAC = 16
"""Fractional bits of every activation, norm weight, bias and logit (Q16)."""
MAX_INNER = 1 << 16
"""Largest inner dimension of an int8 GEMM: 127² · 2^16 < 2^30, so int32 accumulation cannot overflow."""
MAX_QUANTISED = 1 << 31
"""|x| bound of a Q16 value quantised to int8 (and of SiLU's inputs and the logits)."""
MAX_RESIDUAL = 1 << 24
"""|x| bound of the residual stream and of q, k, v: sums of d ≤ 2^14 squares or products stay below 2^62."""
FLOAT32_EXACT = 1 << 24
"""Every integer of magnitude below this is a float32, and so is every sum or product of such integers below it."""
FLOAT_EXACT = 1 << 53
"""Every integer of magnitude below this is a float64, and so is every sum or product of such integers below it."""
SHORT_ATTENTION = 1 << 22
"""Attention over fewer positions divides and sums its probabilities in float64 (R5.6)."""
FLOAT_RESCALE_LIMIT = 1 << 52
"""R5.6: a weight matrix whose rows all keep 127 · Σ|W[r]| · 2^15 · M_r + 64 · 2^S_r within this is rescaled in float64."""
MAX_WIDTH = 1 << 14
"""Largest hidden size and head dimension."""
MAX_WEIGHT = 32.0
"""Largest |w| of a weight matrix: its scale max|w| / 127 < 2^-1, so a row's shift is at least 16."""
ZERO_ROW = 2.0**-32
"""A weight row whose largest |w| is below this is stored as zeros."""
ROPE_TABLE_BITS = 12
ROPE_FRAC = 30
EXP_FRAC = 30
EXP_INPUT_FLOOR = -(64 << FRAC)
"""iexp clamps its argument here: e^-64 is 0 in Q30."""
PROB_FRAC = 15
LOG_FRAC = 24

EXP2_COEFFICIENTS = (1073741824, 744261118, 257941248, 59597083, 10327387, 1431680, 165394, 16377)
"""round(ln(2)^j / j! · 2^30), j = 0..7: 2^t = Σ c_j t^j on [0, 1)."""
LOG2E_Q30 = 1549082005
LN2_Q30 = 744261118
LOG2_LN2_Q24 = -8871228
SERIES_TERMS = 24
"""Terms of h(u) = Σ u^k / (k + 1) in the noise of u < 1/2 (remainder < 2^-27)."""

MATRICES = ("q", "k", "v", "o", "gate", "up", "down")
"""The weight matrices of an ExactLayer, by field name."""
T = TypeVar("T")


class ExactOverflowError(InferenceError):
    """A value broke one of exact mode's stated bounds (the computation would not be exact)."""


def _check(tensor: torch.Tensor, limit: int, what: str) -> None:
    if not tensor.numel():
        return
    low, high = torch.aminmax(tensor)
    if max(-int(low), int(high)) >= limit:
        raise ExactOverflowError(f"{what}: |value| reaches {max(-int(low), int(high))} ≥ {limit}")


def _check_parts(tensor: torch.Tensor, limit: int, parts: Sequence[tuple[torch.Tensor, str]]) -> None:
    """_check of each part (views that cover `tensor`) with one pass over the whole; an error names the first part
    past the bound."""
    try:
        _check(tensor, limit, "")
    except ExactOverflowError:
        for part, what in parts:
            _check(part, limit, what)
        raise


# ---- integer primitives ------------------------------------------------------------------------------

def rdiv(numerator: torch.Tensor, divisor: torch.Tensor | int) -> torch.Tensor:
    """round(a / b), halves up: floor((a + floor(b / 2)) / b), for b > 0 (a shift when b is a power of two)."""
    if isinstance(divisor, int) and divisor & (divisor - 1) == 0:
        return (numerator + (divisor >> 1)) >> (divisor.bit_length() - 1)
    return torch.div(numerator + (divisor >> 1), divisor, rounding_mode="floor")


def _shift_rdiv(numerator: torch.Tensor, bits: int) -> torch.Tensor:
    """rdiv(numerator, 2^bits) in place on `numerator` (a temporary of the caller's)."""
    return numerator.add_(1 << (bits - 1)).bitwise_right_shift_(bits)


def floor_divide_exact(numerator: torch.Tensor, divisor: torch.Tensor | int) -> torch.Tensor:
    """⌊n / d⌋ of integer-valued float64 n and d > 0 with |n| + d < 2^53: one IEEE division, then floor (R5.6,
    "Integer sums and quotients in float64"). In place on `numerator`."""
    return numerator.div_(divisor).floor_()


def isqrt(n: torch.Tensor) -> torch.Tensor:
    """floor(sqrt(n)) exactly for 0 ≤ n < 2^62: the float64 root's floor, exact as it stands below 2^52 (R5.6),
    corrected in integers above."""
    root = n.double().sqrt().floor().long()
    if not n.numel() or int(n.max()) < 1 << 52:
        return root
    for _ in range(2):
        root = torch.where(root * root > n, root - 1, root)
        root = torch.where((root + 1) * (root + 1) <= n, root + 1, root)
    return root


def _exp2_table() -> torch.Tensor:
    """P(t) of R5.6's exp row for every t in [0, 2^16): c_7, then c_j + ((P · t) ≫ 16) for j = 6 … 0, in int64
    (|P · t| < 2^48)."""
    t = torch.arange(1 << FRAC, dtype=torch.int64)
    acc = torch.full_like(t, EXP2_COEFFICIENTS[-1])
    for coefficient in reversed(EXP2_COEFFICIENTS[:-1]):
        acc = coefficient + ((acc * t) >> FRAC)
    return acc


EXP2_TABLE = _exp2_table()
"""2^(t / 2^16) in Q30 by R5.6's polynomial, t = 0 … 2^16 − 1: iexp looks the fraction up instead of running Horner."""


def iexp(d: torch.Tensor) -> torch.Tensor:
    """e^(d / 2^16) in Q30 for Q16 d ≤ 0: base 2, a degree-7 polynomial for the fraction (EXP2_TABLE), a shift for
    the rest, in int64 (|max(d, −2^22) · log2e_Q30| < 2^53)."""
    y = _shift_rdiv(torch.clamp(d, min=EXP_INPUT_FLOOR).mul_(LOG2E_Q30), EXP_FRAC)
    power = EXP2_TABLE.to(y.device).index_select(0, (y & ((1 << FRAC) - 1)).view(-1)).view(y.shape)
    shift = y.bitwise_right_shift_(FRAC).neg_().clamp_(max=62)                 # y ≤ 0: shift ≥ 0
    return power.add_((1 << shift).bitwise_right_shift_(1)).bitwise_right_shift_(shift)


def silu(x: torch.Tensor) -> torch.Tensor:
    """x · σ(x) in Q16, σ in Q30 from iexp(-|x|)."""
    _check(x, MAX_QUANTISED, "SiLU input")
    return _silu(x)


SILU_TABLE_BITS = 19
"""The CPU looks SiLU up for −2^19 ≤ x < 2^19 (±8.0 in Q16), from silu's own integers for every such x."""


@cache
def _silu_table() -> torch.Tensor:
    """silu(x) for x = −2^19 … 2^19 − 1 (made on first use: 8 MiB)."""
    return _computed_silu(torch.arange(-(1 << SILU_TABLE_BITS), 1 << SILU_TABLE_BITS, dtype=torch.int64))


def _silu(x: torch.Tensor) -> torch.Tensor:
    """silu of x already checked against its bound: on the CPU looked up where |x| < 2^19, computed elsewhere."""
    if x.is_cuda or not x.numel():
        return _computed_silu(x)
    index = x + (1 << SILU_TABLE_BITS)
    inside = index.clamp(0, (2 << SILU_TABLE_BITS) - 1)
    y = _silu_table().index_select(0, inside.view(-1)).view(x.shape)
    outside = inside != index
    if bool(outside.any()):
        y[outside] = _computed_silu(x[outside])
    return y


def _computed_silu(x: torch.Tensor) -> torch.Tensor:
    """R5.6's SiLU, computed."""
    e = iexp(x.abs().neg_())
    divisor = e + (1 << EXP_FRAC)
    # σ = rdiv(2^60 where x ≥ 0, else e · 2^30, 2^30 + e)
    numerator = e.bitwise_left_shift_(EXP_FRAC).masked_fill_(x >= 0, 1 << 2 * EXP_FRAC).add_(divisor >> 1)
    return _shift_rdiv(numerator.div_(divisor, rounding_mode="floor").mul_(x), EXP_FRAC)


_FRACTION_WEIGHTS = torch.arange(LOG_FRAC - 1, -1, -1, dtype=torch.int64)


def log2_fixed(n: torch.Tensor) -> torch.Tensor:
    """log2(n) in Q24 for 1 ≤ n < 2^63: the bit length, then 24 fraction bits by repeated squaring of a
    31-bit mantissa."""
    # frexp of the rounded float64 gives bitlength(n) or, rounded up to a power of two, one more
    exponent = torch.frexp(n.double()).exponent.long() - 1
    exponent -= ((n >> exponent) == 0).long()
    mantissa = torch.where(exponent >= 30, n >> torch.clamp(exponent - 30, min=0), n << torch.clamp(30 - exponent, min=0))
    bits = []
    for _ in range(LOG_FRAC):
        # μ ∈ [2^30, 2^31), so μ² < 2^62 and μ² ≫ 30 ∈ [2^30, 2^32): its bit 31 (μ²'s bit 61) is the next fraction
        # bit b (R5.7's), and μ ← (μ² ≫ 30) ≫ b = μ² ≫ (30 + b)
        square = mantissa * mantissa
        bits.append(square >> 61)
        mantissa = square.bitwise_right_shift_(bits[-1] + 30)
    fraction = (torch.stack(bits, dim=-1) << _FRACTION_WEIGHTS.to(n.device)).sum(dim=-1)
    return (exponent << LOG_FRAC) + fraction


def fixed_gumbel(words: torch.Tensor) -> torch.Tensor:
    """The Gumbel noise of 32-bit words x in Q16: g = -ln(-ln(1 - u)), u = (2x + 1) / 2^33, in integers."""
    n = 2 * words + 1
    small = words < (1 << 31)
    h = torch.full_like(n, (1 << 30) // SERIES_TERMS)
    for k in range(SERIES_TERMS - 1, 0, -1):
        h = (1 << 30) // k + ((h * n) >> 33)
    first = log2_fixed(torch.where(small, n * h, (1 << 33) - n))
    log_small = first - (63 << LOG_FRAC)
    d = (33 << LOG_FRAC) - first
    log_large = log2_fixed(torch.where(small, 1, d)) - (LOG_FRAC << LOG_FRAC) + LOG2_LN2_Q24
    log2_e = torch.where(small, log_small, log_large)
    return rdiv(-log2_e * LN2_Q30, 1 << (LOG_FRAC + 30 - FRAC))


def quantise_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token int8 quantisation of Q16 rows: (q, a, e) with |x| ≤ a · 2^e, a ≤ 2^15, q = round(127 x / (a 2^e)),
    q's integers in [−127, 127] held as float64 (the CPU GEMM's operand)."""
    q, a, e, _ = _quantised(x)
    return q, a, e.long()


def _quantised(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """quantise_rows's (q, a, e) and max(a · 2^e, 1) in float64."""
    amax = x.abs().amax(dim=-1, keepdim=True)
    peak = int(amax.max()) if amax.numel() else 0
    if peak >= MAX_QUANTISED:
        raise ExactOverflowError(f"quantised activation: |value| reaches {peak} ≥ {MAX_QUANTISED}")
    # bitlength(m): m = f · 2^bits, f ∈ [1/2, 1); 0 for m = 0
    e = torch.frexp(amax.double()).exponent.sub_(15).clamp_(min=0)  # int32
    a = ((amax - 1) >> e).add_(1)  # ⌈m / 2^e⌉ = ⌊(m − 1) / 2^e⌋ + 1 for m ≥ 1, and 0 for m = 0 (−1 ≫ e = −1)
    divisor = (a << e).clamp_(min=1)
    divisor_float = divisor.double()
    # |127 x + ⌊D/2⌋| + D < 2^39 + 2^32: the float64 quotient's floor is exact
    q = floor_divide_exact(x.double().mul_(127).add_((divisor >> 1).double()), divisor_float)
    return q, a, e, divisor_float


# ---- the integer checkpoint --------------------------------------------------------------------------

@dataclass(frozen=True)
class IntMatrix:
    """An int8 weight matrix [out, in] with its per-row scale M · 2^-S and a Q16 bias."""

    weight: torch.Tensor
    multiplier: torch.Tensor
    shift: torch.Tensor
    bias: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Q16 x [..., in] -> Q16 [..., out]: int8 × int8 summed exactly, rescaled by rdiv(acc · a · M, 127 · 2^(S − e))
        (in float64 where R5.6's bound makes every step exact, else in int64)."""
        if x.shape[-1] > MAX_INNER:
            raise ExactOverflowError(f"GEMM inner dimension {x.shape[-1]} > {MAX_INNER}")
        q, a, e, divisor = _quantised(x)
        if q.is_cuda:
            acc = _cuda_int8_matmul(q.reshape(-1, q.shape[-1]).to(torch.int8), self.weight)
        else:
            operand, column_scale = self.cpu_operands
            if operand.dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest":
                operand = self.weight.double()  # a float32 GEMM may then round (bf16 or TF32 inside)
            acc = q.to(operand.dtype) @ operand.t()
            if column_scale is not None or self._rescale_fits(acc, a):
                # v = acc · a · 2^e · M · 2^-S = acc · a · M / 2^(S − e), exact; rdiv by 127 · 2^(S − e) = ⌊⌊v + 63.5⌋ / 127⌋
                # (the divisor max(a · 2^e, 1) is a · 2^e where a > 0, and acc = 0 where a = 0)
                v = (acc * divisor).mul_(self.column_scale).add_(63.5)
                y = floor_divide_exact(v.floor_(), 127)
                return (y.add_(self.bias) if self.has_bias else y).long()  # |y| < 2^46, |b| < 2^31
        product = acc.reshape(*q.shape[:-1], -1).long() * a * self.multiplier
        shift = self.shift - e
        # rdiv(product, 127 · 2^shift) as a shift then a division by 127: ⌊⌊y / 2^k⌋ / 127⌋ = ⌊y / (127 · 2^k)⌋
        halved = (product + ((127 << shift) >> 1)) >> shift
        return torch.div(halved, 127, rounding_mode="floor") + self.bias

    @cached_property
    def cpu_operands(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The CPU GEMM's weight operand and the rescale's column factors M_r · 2^-S_r (made once), chosen by R5.6's
        bounds on this matrix's rows: the int8 values in float32 where every 127 · Σ|W[r]| < 2^24 (it bounds |acc|
        and every partial sum), else in float64; the rescale in float64 where every
        127 · Σ|W[r]| · 2^15 · M_r + 64 · 2^S_r ≤ 2^52 (else None: per call, `_rescale_fits`)."""
        row_sums = 127 * self.weight.abs().long().sum(dim=1)
        operand = self.weight.to(torch.float32 if int(row_sums.max()) < FLOAT32_EXACT else torch.float64)
        if int((row_sums * (self.multiplier << 15) + (64 << self.shift)).max()) > FLOAT_RESCALE_LIMIT:
            return operand, None
        return operand, self.column_scale

    @cached_property
    def has_bias(self) -> bool:
        return bool(self.bias.any())

    @cached_property
    def column_scale(self) -> torch.Tensor:
        """M_r · 2^-S_r per output row in float64 (exact: M_r < 2^16)."""
        return torch.tensor([m * 2.0**-s for m, s in zip(self.multiplier.tolist(), self.shift.tolist())],
                            dtype=torch.float64)

    @cached_property
    def _rescale_limits(self) -> tuple[int, int]:
        """(max_r M_r, max_r 64 · 2^S_r): the parts of R5.6's rescale bound that do not depend on the input."""
        return int(self.multiplier.max()), int((64 << self.shift).max())

    def _rescale_fits(self, acc: torch.Tensor, a: torch.Tensor) -> bool:
        """R5.6's rescale bound measured on this call: max|acc| · max a · max M_r + max 64 · 2^S_r ≤ 2^52 (it
        implies the per-row bound with this call's |acc_r| and a in place of their worst cases)."""
        if not acc.numel():
            return True
        low, high = torch.aminmax(acc)
        multiplier, shifted = self._rescale_limits
        return int(max(-low, high)) * int(a.max()) * multiplier + shifted <= FLOAT_RESCALE_LIMIT


def _cuda_int8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [m, k] · b[n, k]^T in int32 on CUDA (exact: |sum| < 2^30 by MAX_INNER): torch._int_mm where its shapes
    allow (m > 16, k and n multiples of 8), else a float64 GEMM, exact because every partial sum is an integer
    below 2^53 (untested without a GPU)."""
    if a.shape[0] > 16 and a.shape[1] % 8 == 0 and b.shape[0] % 8 == 0:
        return torch._int_mm(a, b.t().contiguous())
    return (a.double() @ b.double().t()).int()


def _product_rdiv(a: torch.Tensor, b: torch.Tensor, terms: int, bits: int) -> torch.Tensor:
    """rdiv(a @ b, 2^bits) of integer a [..., m, k], b [..., k, n] (int64, or float64 holding integers) whose
    products' absolute values sum to at most `terms` in every output: on the CPU as a float64 GEMM when
    terms + 2^bits < 2^53 (every partial sum is then an integer below 2^53, exact in any order, R5.6), else in
    int64."""
    if a.is_cuda or terms + (1 << bits) >= FLOAT_EXACT:
        return rdiv(_int64_matmul(a.long(), b.long()), 1 << bits)
    if a.shape[-2] == 1:  # one query (decode): a broadcast product and sum beats many tiny batched GEMMs
        product = (a.double().transpose(-1, -2) * b.double()).sum(dim=-2, keepdim=True)
    else:
        product = a.double() @ b.double()
    return product.add_(1 << (bits - 1)).mul_(2.0**-bits).floor_().long()


def _int64_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [..., m, k] · b [..., k, n] in int64 (exact within the stated bounds; CUDA has no int64 GEMM, so there
    a broadcast product and sum)."""
    if not a.is_cuda:
        return a @ b
    return (a[..., :, :, None] * b[..., None, :, :]).sum(dim=-2)


def quantise_matrix(weight: torch.Tensor, bias: torch.Tensor | None = None) -> IntMatrix:
    """Per-output-row int8 weights: s = max|w| / 127 and q = round_half_even(w · 127 / max|w|) in float64,
    s = M · 2^-S with M = round_half_even(f · 2^15) for s = f · 2^k, f in [1/2, 1), S = 15 - k."""
    w = weight.detach().double().cpu()
    if not bool(torch.isfinite(w).all()):
        raise ExactOverflowError("a weight is not finite (NaN or infinite)")
    peak = w.abs().amax(dim=1)
    if float(peak.max()) >= MAX_WEIGHT:
        raise ExactOverflowError(f"a weight of magnitude {float(peak.max())} ≥ {MAX_WEIGHT}")
    live = peak >= ZERO_ROW
    safe_peak = torch.where(live, peak, 1.0)
    q = torch.round(w * 127 / safe_peak[:, None]) * live[:, None]
    mantissa, exponent = torch.frexp(safe_peak / 127)
    multiplier = torch.round(mantissa * 2**15).long() * live
    shift = torch.where(live, 15 - exponent.long(), 15)
    int_bias = _q16(bias) if bias is not None else torch.zeros(w.shape[0], dtype=torch.int64)
    return IntMatrix(q.to(torch.int8), multiplier, shift, int_bias)


def _q16(values: torch.Tensor) -> torch.Tensor:
    """Q16 fixed point of float values (norm weights, biases): ExactOverflowError unless finite and below 2^46, so
    their products stay exact in int64."""
    v = values.detach().double().cpu()
    if not bool(torch.isfinite(v).all()) or (v.numel() and float(v.abs().max()) >= 2.0**46):
        raise ExactOverflowError("a norm weight or bias is not finite or is 2^46 or more")
    return torch.round(v * (1 << FRAC)).long()


@dataclass(frozen=True)
class ExactLayer:
    input_norm: torch.Tensor
    post_norm: torch.Tensor
    q: IntMatrix
    k: IntMatrix
    v: IntMatrix
    o: IntMatrix
    gate: IntMatrix
    up: IntMatrix
    down: IntMatrix

    @cached_property
    def qkv(self) -> IntMatrix:
        """q, k and v as one matrix (their rows stacked): the same integers per output, one quantisation of x."""
        return _stacked(self.q, self.k, self.v)

    @cached_property
    def gate_up(self) -> IntMatrix:
        """gate and up as one matrix (rows stacked)."""
        return _stacked(self.gate, self.up)


def _stacked(*matrices: IntMatrix) -> IntMatrix:
    return IntMatrix(*(torch.cat([getattr(m, f.name) for m in matrices]) for f in fields(IntMatrix)))


@dataclass
class KVCache:
    """Per layer the rotated keys and the values of every position so far, [B, T, kv_heads, hd], their integers held
    in float64 (exact: |k|, |v| < 2^24), and max|k|: views of buffers that grow by doubling, so a decode step
    writes its own position and copies nothing else."""

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    key_peaks: list[int] = field(default_factory=list)
    buffers: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def extend(self, index: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Layer `index`'s keys, values and max|k| with the new positions' appended."""
        keys, values = keys.double(), values.double()
        peak = int(keys.abs().max()) if keys.numel() else 0
        if index == len(self.keys):
            self.keys.append(keys)
            self.values.append(values)
            self.key_peaks.append(peak)
            self.buffers.append((keys, values))
            return keys, values, peak
        length = self.keys[index].shape[1]
        total = length + keys.shape[1]
        key_buffer, value_buffer = self.buffers[index]
        if total > key_buffer.shape[1]:
            key_buffer, value_buffer = (_grown(buffer[:, :length], max(total, 2 * length))
                                        for buffer in (key_buffer, value_buffer))
            self.buffers[index] = (key_buffer, value_buffer)
        key_buffer[:, length:total] = keys
        value_buffer[:, length:total] = values
        self.keys[index], self.values[index] = key_buffer[:, :total], value_buffer[:, :total]
        self.key_peaks[index] = max(self.key_peaks[index], peak)
        return self.keys[index], self.values[index], self.key_peaks[index]


def _grown(held: torch.Tensor, capacity: int) -> torch.Tensor:
    """A buffer of `capacity` positions (dim 1) that starts with `held`."""
    buffer = held.new_empty((held.shape[0], capacity, *held.shape[2:]))
    buffer[:, :held.shape[1]] = held
    return buffer


@dataclass(frozen=True)
class ExactPolicy:
    """A policy in integers (docs/protocol.md, "Exact mode"); `digest` names it."""

    embed: torch.Tensor
    layers: tuple[ExactLayer, ...]
    norm: torch.Tensor
    lm_head: IntMatrix
    rope_frequency: torch.Tensor
    rms_eps: int
    inv_sqrt_head_dim: int
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def vocab_size(self) -> int:
        return int(self.lm_head.weight.shape[0])

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every integer of the checkpoint by name (the digest's input)."""
        out = {"embed": self.embed, "norm": self.norm, "rope.frequency": self.rope_frequency,
               "scalars": torch.tensor([self.rms_eps, self.inv_sqrt_head_dim, self.heads, self.kv_heads,
                                        self.head_dim, len(self.layers)])}
        out.update(_matrix_tensors("lm_head", self.lm_head))
        for index, layer in enumerate(self.layers):
            out[f"layers.{index}.input_norm"] = layer.input_norm
            out[f"layers.{index}.post_norm"] = layer.post_norm
            for name in MATRICES:
                out.update(_matrix_tensors(f"layers.{index}.{name}", getattr(layer, name)))
        return out

    def to(self, device: str | torch.device) -> ExactPolicy:
        """The same integers on `device`."""
        def move(item: object) -> object:
            if isinstance(item, torch.Tensor):
                return item.to(device)
            if isinstance(item, (IntMatrix, ExactLayer)):
                return replace(item, **{f.name: move(getattr(item, f.name)) for f in fields(item)})
            return item

        return replace(self, embed=move(self.embed), norm=move(self.norm), lm_head=move(self.lm_head),
                       rope_frequency=move(self.rope_frequency), layers=tuple(move(layer) for layer in self.layers))

    def digest(self) -> str:
        """sha256 over the tensors in name order: name, NUL, dtype, shape, little-endian data."""
        return tensors_digest(self.tensors())

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                cache: KVCache) -> torch.Tensor:
        """Q16 final hidden states (the LM head's input) of new tokens `ids` [B, T] at `positions`; `mask`
        [B, cached + T] marks real (1) and padding (0) positions; `cache` grows by T."""
        if int(positions.max()) >= POSITION_LIMIT or int(positions.min()) < 0:
            raise ExactOverflowError("positions must lie in [0, 2^32)")
        h = self.embed.index_select(0, ids.reshape(-1)).view(*ids.shape, -1)
        cos, sin = rope_tables(self.rope_frequency, positions)
        _check(h, MAX_RESIDUAL, "RMSNorm input")
        # every later RMSNorm input is a residual, checked against the same bound where it is made
        for index, layer in enumerate(self.layers):
            x = _rms_norm(h, layer.input_norm, self.rms_eps)
            h = h + self._attention(layer, x, cos, sin, mask, cache, index)
            _check(h, MAX_RESIDUAL, "residual")
            x = _rms_norm(h, layer.post_norm, self.rms_eps)
            gate_up = layer.gate_up(x)
            gate, up = gate_up.split(layer.gate.weight.shape[0], dim=-1)
            _check_parts(gate_up, MAX_QUANTISED, ((gate, "SiLU input"), (up, "up projection")))
            h = h + layer.down(_shift_rdiv(_silu(gate).mul_(up), FRAC))
            _check(h, MAX_RESIDUAL, "residual")
        return _rms_norm(h, self.norm, self.rms_eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Q16 logits of Q16 final hidden states."""
        logits = self.lm_head(hidden)
        _check(logits, MAX_QUANTISED, "logits")
        return logits

    def _attention(self, layer: ExactLayer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   mask: torch.Tensor, cache: KVCache, index: int) -> torch.Tensor:
        batch, new = x.shape[:2]
        qkv = layer.qkv(x).view(batch, new, self.heads + 2 * self.kv_heads, self.head_dim)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=2)
        _check_parts(qkv, MAX_RESIDUAL, ((q, "q"), (k, "k"), (v, "v")))
        q, k = rotate(qkv[:, :, :self.heads + self.kv_heads], cos, sin).split([self.heads, self.kv_heads], dim=2)
        q = _shift_rdiv(q * self.inv_sqrt_head_dim, FRAC)
        k, v, key_peak = cache.extend(index, k, v)
        group = self.heads // self.kv_heads
        if group > 1:
            k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
        keys, values = k.permute(0, 2, 3, 1), v.permute(0, 2, 1, 3)       # [B, H, hd, S], [B, H, S, hd]
        total = keys.shape[-1]
        if total >= POSITION_LIMIT:
            raise ExactOverflowError("attention over 2^32 positions or more")
        terms = self.head_dim * int(q.abs().max()) * key_peak                            # ≥ Σ |q_i k_i|
        scores = _product_rdiv(q.permute(0, 2, 1, 3), keys, terms, FRAC)                  # [B, H, T, S]
        allowed = mask[:, None, None, :].bool()
        if new > 1:  # a decoded token sees every cached position
            query_at = torch.arange(total - new, total, device=x.device)[:, None]
            allowed = (torch.arange(total, device=x.device)[None, :] <= query_at)[None, None] & allowed
        peak = scores.masked_fill(~allowed, torch.iinfo(torch.int64).min).amax(dim=-1, keepdim=True)
        weights = iexp(torch.where(allowed, scores - peak, EXP_INPUT_FLOOR))  # iexp(EXP_INPUT_FLOOR) = 0
        total_weight = torch.clamp(weights.sum(dim=-1, keepdim=True), min=1)
        if total < SHORT_ATTENTION and not x.is_cuda:
            # E_j ≤ 2^30: |E_j · 2^15 + ⌊ΣE/2⌋| + ΣE < 2^45 + 2^53 · 3/4, so the float64 quotient's floor is exact
            probs = floor_divide_exact((weights << PROB_FRAC).add_(total_weight >> 1).double(),
                                       total_weight.double())  # integers in float64: _product_rdiv's operand
        else:
            probs = rdiv(weights << PROB_FRAC, total_weight)
        # Σ_j P_j ≤ 2^15 + S / 2 and |v| < 2^24: Σ_j P_j |v_j| < 2^15 · 2^24 + S · 2^23
        out = _product_rdiv(probs, values, (((1 << PROB_FRAC) + total) << 24), PROB_FRAC)  # [B, H, T, hd]
        return layer.o(out.permute(0, 2, 1, 3).reshape(batch, new, self.heads * self.head_dim))


def _matrix_tensors(prefix: str, matrix: IntMatrix) -> dict[str, torch.Tensor]:
    return {f"{prefix}.weight": matrix.weight, f"{prefix}.multiplier": matrix.multiplier,
            f"{prefix}.shift": matrix.shift, f"{prefix}.bias": matrix.bias}


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 of name ‖ NUL ‖ dtype ‖ NUL ‖ shape (u32 LE each) ‖ data (LE), over the names in sorted order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous().cpu()
        digest.update(name.encode() + b"\0" + str(tensor.dtype).removeprefix("torch.").encode() + b"\0")
        digest.update(b"".join(int(size).to_bytes(4, "little") for size in tensor.shape))
        array = tensor.numpy()
        digest.update(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
    return digest.hexdigest()


def rms_norm(h: torch.Tensor, weight: torch.Tensor, eps_q32: int) -> torch.Tensor:
    """Q16 RMSNorm: r = isqrt(floor(Σh² / d) + eps·2^32) (Q16), y = round(round(h · 2^16 / r) · γ / 2^16)."""
    _check(h, MAX_RESIDUAL, "RMSNorm input")
    return _rms_norm(h, weight, eps_q32)


def _rms_norm(h: torch.Tensor, weight: torch.Tensor, eps_q32: int) -> torch.Tensor:
    """rms_norm of h already checked against its bound."""
    width = h.shape[-1]
    if width > MAX_WIDTH:
        raise ExactOverflowError(f"width {width} > {MAX_WIDTH}")
    total = (h * h).sum(dim=-1, keepdim=True) // width + eps_q32
    if eps_q32 < (1 << 52) - (1 << 48):  # |h| < 2^24: total < 2^52, where the float64 root's floor is isqrt (R5.6)
        root = total.double().sqrt_().floor_()
    else:
        root = isqrt(total).double()
    # rdiv(h · 2^16, r): |h · 2^16 + ⌊r/2⌋| + r < 2^40 + 2^32, so the float64 quotient's floor is exact
    normed = floor_divide_exact(h.double().mul_(1 << FRAC).add_(root.mul(0.5).floor_()), root).long()
    return _shift_rdiv(normed.mul_(weight), FRAC)


def _rope_table() -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.arange((1 << ROPE_TABLE_BITS) + 1, dtype=torch.float64) * (2 * math.pi / (1 << ROPE_TABLE_BITS))
    return (torch.round(torch.cos(angles) * (1 << ROPE_FRAC)).long(),
            torch.round(torch.sin(angles) * (1 << ROPE_FRAC)).long())


COS_TABLE, SIN_TABLE = _rope_table()
"""round_half_even(cos and sin(2πk / 4096) · 2^30), k = 0..4096 (docs/protocol.md gives their digest)."""


def rope_tables(frequency: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q30 cos and sin of (position · F_i mod 2^32) turns / 2^32: the table entry and linear interpolation over
    the low 20 bits. [B, T, hd/2]."""
    turns = (positions[..., None] * frequency) & 0xFFFFFFFF
    index = turns >> (32 - ROPE_TABLE_BITS)
    fraction = turns & ((1 << (32 - ROPE_TABLE_BITS)) - 1)

    def interpolate(table: torch.Tensor) -> torch.Tensor:
        table = table.to(frequency.device)
        low = table.index_select(0, index.reshape(-1)).view(index.shape)
        high = table.index_select(0, index.reshape(-1) + 1).view(index.shape)
        return _shift_rdiv((high - low).mul_(fraction), 32 - ROPE_TABLE_BITS).add_(low)

    return interpolate(COS_TABLE), interpolate(SIN_TABLE)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in the half-split layout on Q16 x [B, T, heads, hd] with Q30 cos, sin [B, T, hd/2]."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    cos, sin = cos[:, :, None], sin[:, :, None]
    return torch.cat([_shift_rdiv((first * cos).sub_(second * sin), ROPE_FRAC),
                      _shift_rdiv((second * cos).add_(first * sin), ROPE_FRAC)], dim=-1)


# ---- from a float model ------------------------------------------------------------------------------

def quantise_policy(model: torch.nn.Module) -> ExactPolicy:
    """The integer form of a Llama- or Qwen2-style Hugging Face model (float weights, any dtype)."""
    config = model.config
    if config.model_type not in ("llama", "qwen2"):
        raise InferenceError(f"exact mode supports llama and qwen2 models, not {config.model_type}")
    rope = getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", "default") != "default" or getattr(config, "hidden_act", "silu") != "silu":
        raise InferenceError("exact mode supports default RoPE and SiLU only")
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    base = float(getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"])
    decoder = model.get_decoder()
    layers = []
    for index, block in enumerate(decoder.layers):
        attention, mlp = block.self_attn, block.mlp
        at = f"layers.{index}"
        layer = ExactLayer(
            input_norm=_bounded_q16(f"{at}.input_norm", block.input_layernorm.weight),
            post_norm=_bounded_q16(f"{at}.post_norm", block.post_attention_layernorm.weight),
            **{name: _named(f"{at}.{name}", quantise_matrix, proj.weight, proj.bias)
               for name, proj in (("q", attention.q_proj), ("k", attention.k_proj), ("v", attention.v_proj),
                                  ("o", attention.o_proj), ("gate", mlp.gate_proj), ("up", mlp.up_proj),
                                  ("down", mlp.down_proj))})
        for name in MATRICES:
            _named(f"{at}.{name}.bias", _check, getattr(layer, name).bias, MAX_QUANTISED, "norm weight or bias")
        layers.append(layer)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    frequency = torch.round(base ** -exponents / (2 * math.pi) * 2.0**32).long()
    embed = _named("embed", _q16, decoder.embed_tokens.weight)
    _named("embed", _check, embed, MAX_RESIDUAL, "embedding")
    norm = _bounded_q16("norm", decoder.norm.weight)
    lm_head = _named("lm_head", quantise_matrix, model.get_output_embeddings().weight)
    return ExactPolicy(
        embed=embed, layers=tuple(layers), norm=norm, lm_head=lm_head, rope_frequency=frequency,
        rms_eps=max(1, round(config.rms_norm_eps * 2.0**32)), inv_sqrt_head_dim=round(2.0**FRAC / math.sqrt(head_dim)),
        heads=heads, kv_heads=kv_heads, head_dim=head_dim)


def _named(where: str, make: Callable[..., T], *args: object) -> T:
    """make(*args), an ExactOverflowError from it naming the part of the checkpoint it came from (R5.5's names)."""
    try:
        return make(*args)
    except ExactOverflowError as exc:
        raise ExactOverflowError(f"{where}: {exc}") from None


def _bounded_q16(where: str, weight: torch.Tensor) -> torch.Tensor:
    """A norm weight in Q16, ExactOverflowError (naming `where`) past its bound."""
    values = _named(where, _q16, weight)
    _named(where, _check, values, MAX_QUANTISED, "norm weight or bias")
    return values


# ---- sampling and generation -------------------------------------------------------------------------

NOISE_MAX = 23 << FRAC
"""An upper bound of every fixed_gumbel value: L ≥ −33 · 2^24 below 2^31 (n · h ≥ 2^30), L > log2 ln 2 above, so
g ≤ 33 ln 2 < 23."""
NOISE_BUCKET_BITS = 12
NOISE_SLACK = 64
"""Q16 units (10^-3) added to a bucket's first noise value to bound the bucket (the real g falls as x grows and
the integer g is within 10^-5, 0.7 units, of it), and the margin around `gumbel_estimate`'s scores (R5.7)."""
NOISE_CEILINGS = torch.clamp(fixed_gumbel(torch.arange(1 << NOISE_BUCKET_BITS, dtype=torch.int64)
                                          << (32 - NOISE_BUCKET_BITS)) + NOISE_SLACK, max=NOISE_MAX)
"""A bound of g over the words of each bucket (the words' top 12 bits)."""
BAR_TOKENS = 32


SAMPLE_CHUNK = 1 << 20
"""Noise words drawn at once (rows × V): the sampler's int64 work tensors stay under ~10 MiB each."""


def sample_fixed(logits: torch.Tensor, seeds: torch.Tensor, position: int | torch.Tensor,
                 temperature: float, words: torch.Tensor | None = None) -> torch.Tensor:
    """Exact-mode sampling rule over Q16 logits [B, V]: T = 0 the argmax; T > 0 the argmax of
    z = round(l · 2^16 / round(T · 2^16)) plus g(s, i, v) in Q16; ties to the lowest token id.

    The integer noise is computed only where it can matter (R5.7, `_draw`): the BAR_TOKENS tokens with the highest
    bound (z + the ceiling of their word's bucket) get float64 estimates that decide most rows; in any other row
    their exact scores set a bar, a token whose bound is below it can neither win nor tie, and any other token whose
    bound reaches it gets its exact score too. The result is the full rule's.
    Rows are drawn SAMPLE_CHUNK words at a time (each row's draw is its own); `words` are the rows' noise words
    [B, V] at this position where the caller drew them already."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scale = round(temperature * (1 << FRAC))
    if scale < 1:
        raise InferenceError("temperature below 2^-17 is not representable in exact mode")
    positions = torch.as_tensor(position, dtype=torch.int64, device=seeds.device).expand(seeds.shape[0])
    z = logits if scale == 1 << FRAC else rdiv(logits * (1 << FRAC), scale)  # rdiv(l · 2^16, 2^16) = l
    rows = max(1, SAMPLE_CHUNK // max(1, z.shape[-1]))
    drawn = []
    for begin in range(0, z.shape[0], rows):
        end = begin + rows
        drawn.append(_draw(z[begin:end], noise_words(seeds[begin:end], positions[begin:end], z.shape[-1])
                           if words is None else words[begin:end]))
    return drawn[0] if len(drawn) == 1 else torch.cat(drawn)


def gumbel_estimate(words: torch.Tensor) -> torch.Tensor:
    """The real Gumbel noise −ln(−ln(1 − u)) of words x, u = (2x + 1) / 2^33, in float64 Q16 units: within
    10^-9 of the real value, so within NOISE_SLACK of fixed_gumbel's integer (R5.7)."""
    u = words.double().mul_(2.0**-32).add_(2.0**-33)                        # exact: 2x + 1 < 2^33
    return u.neg_().log1p_().neg_().log_().mul_(-(1 << FRAC))


def _draw(z: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """sample_fixed's rule on scaled logits z [B, V] with their noise words.

    The BAR_TOKENS tokens with the highest bound first get float64 scores z + gumbel_estimate, each within
    NOISE_SLACK of its exact score: a row where one token's low end (score − slack) is above every other bar token's
    high end and above every other token's bound has that token as its draw, with no integer noise computed. Any
    other row is drawn by the integer rule (`_draw_exact`)."""
    vocab = z.shape[-1]
    if vocab <= BAR_TOKENS:
        return (z + fixed_gumbel(words)).argmax(dim=-1)
    buckets = (words >> (32 - NOISE_BUCKET_BITS)).view(-1)
    bound = z + NOISE_CEILINGS.to(z.device).index_select(0, buckets).view(z.shape)
    highest, top = bound.topk(BAR_TOKENS + 1, dim=-1)
    top = top[:, :BAR_TOKENS]
    estimate = z.gather(-1, top).double().add_(gumbel_estimate(words.gather(-1, top)))
    low, leader = estimate.max(dim=-1, keepdim=True)
    low.sub_(NOISE_SLACK)
    # low ≤ the leader's exact score: the leader is the draw unless another bar token's high end or the highest
    # bound past the bar reaches it
    unsure = (estimate.add_(NOISE_SLACK) >= low).sum(dim=-1) > 1
    unsure |= highest[:, BAR_TOKENS] >= low[:, 0]
    winner = top.gather(-1, leader).squeeze(-1)
    if bool(unsure.any()):
        rows = unsure.nonzero().squeeze(-1)
        winner.index_copy_(0, rows, _draw_exact(z.index_select(0, rows), words.index_select(0, rows),
                                                bound.index_select(0, rows), top.index_select(0, rows)))
    return winner


def _draw_exact(z: torch.Tensor, words: torch.Tensor, bound: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """The integer rule on rows z [B, V] with their bounds and bar tokens `top`: the bar tokens' exact scores set
    the bar; a token whose bound is below it can neither win nor tie, any other gets its exact score too."""
    vocab = z.shape[-1]
    top_scores = z.gather(-1, top) + fixed_gumbel(words.gather(-1, top))
    best = top_scores.amax(dim=-1)
    rest = (bound >= best[:, None]).scatter_(-1, top, False)
    if not bool(rest.any()):
        return torch.where(top_scores == best[:, None], top, vocab).amin(dim=-1)
    row, token = rest.nonzero(as_tuple=True)
    rest_scores = z[row, token] + fixed_gumbel(words[row, token])
    best = best.scatter_reduce(0, row, rest_scores, "amax")
    winner = torch.where(top_scores == best[:, None], top, vocab).amin(dim=-1)
    return winner.scatter_reduce(0, row, torch.where(rest_scores == best[row], token, vocab), "amin")


@dataclass(frozen=True)
class ExactCompletion:
    token_ids: list[int]
    logits: torch.Tensor
    """int64 Q16 [n_tokens, V]: the logits each token was drawn from."""
    hidden: torch.Tensor
    """int64 Q16 [n_tokens, d]: the final hidden state each token's logits came from."""


Draw = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]
"""(Q16 logits [B, V], seeds [B], position) -> token ids [B]: how a generation picks its tokens."""


@torch.inference_mode()
def generate(policy: ExactPolicy, prompts: Sequence[Sequence[int]], seeds: Sequence[int], temperature: float,
             max_tokens: int, eos_ids: Sequence[int], pad_id: int = 0, draw: Draw | None = None) -> list[ExactCompletion]:
    """One completion per prompt, left-padded in one batch: a prefill, then one decode step a token with the
    KV cache. Each row's integers are those of the row alone (every operation is per row and exact). `draw`
    replaces the sampling rule (benchmarks' dishonest samplers)."""
    device = policy.embed.device
    batch, width = len(prompts), max(len(p) for p in prompts)
    seed_tensor = torch.tensor([int(s) for s in seeds], dtype=torch.int64, device=device)
    if draw is None:
        every_word = None
        if temperature > 0 and batch * max_tokens * policy.vocab_size <= SAMPLE_CHUNK:
            # few enough noise words to draw every step's at once (R5.1's words depend on seed, position, token only)
            steps = torch.arange(max_tokens, dtype=torch.int64, device=device)
            every_word = noise_words(seed_tensor.repeat(max_tokens), steps.repeat_interleave(batch),
                                     policy.vocab_size).view(max_tokens, batch, -1)

        def draw(logits: torch.Tensor, seeds: torch.Tensor, position: int) -> torch.Tensor:
            return sample_fixed(logits, seeds, position, temperature,
                                None if every_word is None else every_word[position])

    ids = torch.full((batch, width), pad_id, dtype=torch.int64)
    mask = torch.zeros((batch, width), dtype=torch.int64)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt))
        mask[row, width - len(prompt):] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    cache = KVCache()
    hidden = policy.forward(ids, positions, mask, cache)[:, -1]
    logits = policy.logits(hidden)
    next_position = positions[:, -1] + 1
    eos = torch.tensor(list(eos_ids), dtype=torch.int64, device=device)
    tokens, all_logits, all_hidden = [], [], []
    ended = torch.zeros(batch, dtype=torch.bool, device=device)
    for step in range(max_tokens):
        chosen = draw(logits, seed_tensor, step)
        tokens.append(chosen.masked_fill(ended, pad_id))
        all_logits.append(logits)
        all_hidden.append(hidden)
        ended |= torch.isin(chosen, eos)
        if step + 1 == max_tokens or bool(ended.all()):
            break
        mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.int64, device=device)], dim=1)
        hidden = policy.forward(tokens[-1][:, None], next_position[:, None], mask, cache)[:, -1]
        logits = policy.logits(hidden)
        next_position = next_position + 1
    token_rows = torch.stack(tokens, dim=1).tolist()
    # each completion's logits and hidden states are views of these (one copy of the steps' tensors, not two)
    logit_rows, hidden_rows = torch.stack(all_logits, dim=1).cpu(), torch.stack(all_hidden, dim=1).cpu()
    completions = []
    eos_set = set(int(e) for e in eos_ids)
    for row in range(batch):
        length = next((k + 1 for k, t in enumerate(token_rows[row]) if t in eos_set), len(token_rows[row]))
        completions.append(ExactCompletion(token_rows[row][:length], logit_rows[row, :length],
                                           hidden_rows[row, :length]))
    return completions


@torch.inference_mode()
def prefill_logits(policy: ExactPolicy, prompt: Sequence[int], completion: Sequence[int]) -> torch.Tensor:
    """Q16 logits [len(completion), V] each completion token was drawn from, in one pass (the validator's)."""
    sequence = list(prompt) + list(completion)[:-1]
    ids = torch.tensor([sequence], device=policy.embed.device)
    hidden = policy.forward(ids, torch.arange(len(sequence), device=ids.device)[None], torch.ones_like(ids), KVCache())
    return policy.logits(hidden[0, len(prompt) - 1:]).cpu()


PREFILL_TOKENS = 1 << 12
"""Padded tokens a batched prefill puts through one forward pass (bounds its activations' memory)."""


@torch.inference_mode()
def prefill_logits_batch(policy: ExactPolicy, pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
                         pad_id: int = 0) -> list[torch.Tensor]:
    """`prefill_logits` of each (prompt, completion) pair, left-padded together in as few passes as PREFILL_TOKENS
    allows: the same integers, as each row's are its own (R5.6)."""
    sequences = [list(prompt) + list(completion)[:-1] for prompt, completion in pairs]
    out: list[torch.Tensor] = []
    begin = 0
    while begin < len(pairs):
        end, width = begin + 1, len(sequences[begin])
        while end < len(pairs) and max(width, len(sequences[end])) * (end + 1 - begin) <= PREFILL_TOKENS:
            width = max(width, len(sequences[end]))
            end += 1
        ids = torch.full((end - begin, width), pad_id, dtype=torch.int64)
        mask = torch.zeros((end - begin, width), dtype=torch.int64)
        for row, sequence in enumerate(sequences[begin:end]):
            ids[row, width - len(sequence):] = torch.tensor(sequence, dtype=torch.int64)
            mask[row, width - len(sequence):] = 1
        ids, mask = ids.to(policy.embed.device), mask.to(policy.embed.device)
        hidden = policy.forward(ids, (mask.cumsum(-1) - 1).clamp_min(0), mask, KVCache())
        rows, columns = [], []
        for row, (prompt, completion) in enumerate(pairs[begin:end]):
            first = width - len(sequences[begin + row]) + len(prompt) - 1
            rows += [row] * len(completion)
            columns += range(first, first + len(completion))
        logits = policy.logits(hidden[rows, columns]).cpu()
        out += logits.split([len(completion) for _, completion in pairs[begin:end]])
        begin = end
    return out


@dataclass(frozen=True)
class Deviation:
    """The first token of a completion that is not the sampling rule's draw, with the integers that decide it."""

    position: int
    expected: int
    """The rule's draw from the recomputed logits."""
    got: int
    """The completion's token."""
    expected_logit: int
    got_logit: int
    """Q16 logits of the two tokens at `position`."""
    expected_score: int
    got_score: int
    """Q16 scores z + g of the two tokens (R5.7): the draw's is the larger, or equal with the lower token id."""


def token_scores(logits: torch.Tensor, seed: int, position: int, temperature: float,
                 tokens: Sequence[int]) -> list[int]:
    """R5.7's Q16 scores z[v] + g(s, i, v) of `tokens` at one position (Q16 logits [V])."""
    z = rdiv(logits[list(tokens)] * (1 << FRAC), round(temperature * (1 << FRAC)))
    words = noise_words(torch.tensor([int(seed)]), torch.tensor([position]), logits.shape[-1])[0]
    return (z + fixed_gumbel(words[list(tokens)])).tolist()


def deviation(policy: ExactPolicy, prompt: Sequence[int], completion: Sequence[int], seed: int,
              temperature: float) -> Deviation | None:
    """The validator's replay with tolerance zero: the first token that is not the rule's draw from the
    recomputed logits, with both tokens' logits and scores (None: every token is the draw)."""
    logits = prefill_logits(policy, prompt, completion)
    seeds = torch.full((len(completion),), int(seed), dtype=torch.int64)
    drawn = sample_fixed(logits, seeds, torch.arange(len(completion)), temperature)
    differs = (drawn != torch.tensor(list(completion))).nonzero()
    if not differs.numel():
        return None
    position = int(differs[0])
    expected, got = int(drawn[position]), int(completion[position])
    expected_score, got_score = token_scores(logits[position], seed, position, temperature, [expected, got])
    return Deviation(position=position, expected=expected, got=got, expected_logit=int(logits[position, expected]),
                     got_logit=int(logits[position, got]), expected_score=expected_score, got_score=got_score)


def first_deviation(policy: ExactPolicy, prompt: Sequence[int], completion: Sequence[int], seed: int,
                    temperature: float) -> int | None:
    """The position of `deviation` (None: every token is the rule's draw)."""
    found = deviation(policy, prompt, completion, seed, temperature)
    return None if found is None else found.position
