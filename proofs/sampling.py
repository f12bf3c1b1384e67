"""Seeded Gumbel-max sampling (rule v3: counter-based noise, seeds from the nonce's on-chain pin) and its replay.

Sampling rule v3 (shared by every backend and device; docs/protocol.md states it for re-implementers).
The seed of a completion (63 bits, `derive_seed`) is keyed by the pool seed and fixed by (worker, the hash of the
block that pinned the submission's step, the row's sample index): the step is not an input, and the pinning block
(ComputePool's pin rule: the worker's previous submission, first join or skip) is mined before the worker can know
its hash, so a worker holds exactly one valid file per nonce — it can neither try the steps the async level allows
(rule v2 seeded by the step a submission names: a file per step, the best one submitted) nor time the pin.
The noise of token v at decode position i (0-based index of the token in its completion) of a completion
with seed s is a pure function g(s, i, v):

    key      (k0, k1)         = (s mod 2^32, floor(s / 2^32))
    counter  (c0, c1, c2, c3) = (floor(v / 4), i, 0, 0)
    x        = word (v mod 4) of Philox4x32-10(counter, key)           (Random123's generator, 10 rounds)
    w        = min(fl32(fl32(x) * 2^-32 + 2^-33), 1 - 2^-24)           (float32, round to nearest even)
    g        = -log(-log1p(-w))                                         (float32)

w lies in [2^-33, 1 - 2^-24] (never 0 or 1) and carries the word's full 32 bits where they matter: the
Gumbel maximum of a row is decided by the tokens with the smallest E = -log1p(-w), i.e. the smallest w,
where float32 holds x exactly (x < 2^24); near the row's maximum (E ~ 1/V) a 32-bit word resolves g to
~V * 2^-32 (4e-5 at V = 2^18), far below any logit tolerance. Mapping 24-bit uniforms through -log(-log u)
instead would quantise exactly that tail (to ~V * 2^-24, 1 % at V = 152k). g is bounded: G_MIN <= g <= G_MAX.

Integer words and w are the same bits on every device (integer arithmetic; IEEE conversion and addition
are correctly rounded). log1p and log are not correctly rounded everywhere: implementations differ by a few
float32 ulps, |delta g| <= GUMBEL_TOLERANCE, which the replay adds to its bound.

With temperature T > 0, float32 logits l_i and top-p p, the token is

    argmax over v in Nucleus(l_i / T, p) of  l_i[v] / T + g(s, i, v)

an exact sample from softmax(l_i / T) restricted to the nucleus. T == 0 means greedy (argmax of l_i).
Because g is a pure function of (s, i, v), a worker draws it where its logits live (GPU or CPU) and a
validator replays any set of positions at once, in any order.

Replay with tolerance. The validator recomputes logits l' on its own hardware; they differ from the
worker's by numerical noise. With a logit tolerance eps (the largest |l - l'| the pool accepts as noise),
token t at step i passes when both hold (slack = 2 eps / T + 2 GUMBEL_TOLERANCE):

    nucleus:  e^(-2 eps / T) * mass'({v : l'[v] > l'[t] + 2 eps}) < p
    argmax:   l'[t] / T + g[t] >= max over v in Core of (l'[v] / T + g[v]) - slack
              where Core = {v : e^(2 eps / T) * mass'({u : l'[u] > l'[v] - 2 eps}) < p}

(mass' = probability under softmax(l'/T)). Claim: if |l[v] - l'[v]| <= eps for every v, an
honestly sampled token always passes (no false positives): every token the worker could
have excluded from its nucleus lies outside Core, every token in Core was in the worker's
nucleus, and the scores move by at most 2 eps / T plus the two noise values' float difference.
For p = 1 both sets are the whole vocabulary and the rule reduces to the argmax condition.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import struct
from collections.abc import Sequence

import torch

from proofs.counter import check_positions
from pydantic import BaseModel, ConfigDict, Field

_SEED_DOMAIN = b"proofswarm/sampling-seed/v2"
SEED_BITS = 63
REPLAY_BLOCK_ELEMENTS = 1 << 22
"""Logits replayed at once (block rows × vocab): each float32 work tensor of a block is at most 16 MiB
whatever the vocabulary or the completion's length (27 rows at V = 152,064; 128 rows at V = 32,768).
Every row is replayed on its own, so the block size changes no result bit."""
DEVICE_REPLAY_BLOCK_ELEMENTS = 1 << 26
"""The same on an accelerator (256 MiB float32 work tensors): fewer, larger kernel launches."""


class SamplingSpecError(ValueError):
    """Invalid input to seed derivation or replay (e.g. a malformed worker address)."""


def normalize_address(worker: str) -> bytes:
    """The 20 bytes of a 0x-prefixed hex Ethereum address (any case)."""
    text = worker[2:] if worker[:2] in ("0x", "0X") else ""
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) != 20:
        raise SamplingSpecError(f"not a 20-byte hex address: {worker!r}")
    return raw


def derive_seed(pool_seed: bytes, worker: str, seed_block_hash: bytes, sample_index: int) -> int:
    """The sampling seed of one completion: the first 63 bits (big-endian) of
    HMAC-SHA256(key=pool_seed, msg=domain || address (20 B) || seed block hash (32 B) || index (u64 BE)),
    where the seed block is the one that pinned the submission's step (`WorkSubmitted.seedBlock`)."""
    if not 0 <= sample_index < 2**64:
        raise SamplingSpecError("sample_index must be a uint64")
    if len(seed_block_hash) != 32:
        raise SamplingSpecError(f"seed block hash must be 32 bytes, got {len(seed_block_hash)}")
    message = _SEED_DOMAIN + normalize_address(worker) + bytes(seed_block_hash) + struct.pack(">Q", sample_index)
    digest = hmac.new(pool_seed, message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
PHILOX_KEY_BUMPS = (0x9E3779B9, 0xBB67AE85)
PHILOX_ROUNDS = 10
_WORD = 0xFFFFFFFF

W_MIN = 2.0**-33
W_MAX = 1.0 - 2.0**-24
G_MAX = 22.87390  # -log(-log1p(-W_MIN)) = 22.873857, rounded up
G_MIN = -2.81155  # -log(-log1p(-W_MAX)) = -2.811541, rounded down
GUMBEL_TOLERANCE = 1e-5
"""Largest |g - g'| between two conforming implementations of the float transform (a few float32 ulps
of log1p and log at |g| <= 23 is ~1e-6; this allows 10x that)."""


NOISE_CHUNK_ELEMENTS = 1 << 20
"""Noise values computed at once by the torch path: its int64 work tensors stay under ~40 MiB."""


def philox4x32_10(
    counter: Sequence[torch.Tensor | int], key: Sequence[torch.Tensor | int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random123's Philox4x32-10 on int64 tensors holding uint32 words (counter and key broadcast
    together; ints allowed). Returns the four output words.

    The 32x32 -> 64-bit products are int64 multiplications that wrap (two's complement); their low and
    high words are masked out, so the bits equal the unsigned products' (tests compare with a numpy
    uint64 reference over 10^6 inputs)."""
    tensors = [c if isinstance(c, torch.Tensor) else torch.tensor(c, dtype=torch.int64) for c in (*counter, *key)]
    device = next((t.device for t in tensors if t.dim() > 0), tensors[0].device)
    tensors = [t.to(device=device, dtype=torch.int64) for t in tensors]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    c0, c1, c2, c3 = (torch.empty(shape, dtype=torch.int64, device=device).copy_(t) for t in tensors[:4])
    k0, k1 = tensors[4], tensors[5]
    p0 = torch.empty_like(c0)
    p1 = torch.empty_like(c0)
    m0, m1 = PHILOX_MULTIPLIERS
    for round_index in range(PHILOX_ROUNDS):
        torch.mul(c0, m0, out=p0)
        torch.mul(c2, m1, out=p1)
        # (c0, c1, c2, c3) <- (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))
        torch.bitwise_right_shift(p1, 32, out=c0).bitwise_and_(_WORD).bitwise_xor_(c1).bitwise_xor_(k0)
        c1, p1 = p1.bitwise_and_(_WORD), c1
        torch.bitwise_right_shift(p0, 32, out=c2).bitwise_and_(_WORD).bitwise_xor_(c3).bitwise_xor_(k1)
        c3, p0 = p0.bitwise_and_(_WORD), c3
        if round_index + 1 < PHILOX_ROUNDS:
            k0 = (k0 + PHILOX_KEY_BUMPS[0]) & _WORD
            k1 = (k1 + PHILOX_KEY_BUMPS[1]) & _WORD
    return c0, c1, c2, c3


def _seed_key(seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Philox's key words (s mod 2^32, floor(s / 2^32)) of 63-bit seeds."""
    return seeds & _WORD, seeds >> 32


def noise_words(seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """x(s, i, v) for every v < vocab_size: int64 [rows, V], row r at seed seeds[r] and position
    positions[r] (1-D int64 tensors of one length, or broadcastable)."""
    seeds, positions = torch.broadcast_tensors(torch.as_tensor(seeds, dtype=torch.int64),
                                               check_positions(torch.as_tensor(positions, dtype=torch.int64)))
    rows = seeds.shape[0]
    blocks = (vocab_size + 3) // 4
    k0, k1 = _seed_key(seeds[:, None])
    block_index = torch.arange(blocks, dtype=torch.int64, device=seeds.device)[None, :]
    words = philox4x32_10((block_index, positions[:, None], 0, 0), (k0, k1))
    return torch.stack(words, dim=-1).reshape(rows, 4 * blocks)[:, :vocab_size]


def uniforms_from_words(words: torch.Tensor) -> torch.Tensor:
    """w = min(fl32(fl32(x) * 2^-32 + 2^-33), 1 - 2^-24): float32, never 0 or 1, same bits everywhere."""
    return words.to(torch.float32).mul_(2.0**-32).add_(W_MIN).clamp_max_(W_MAX)


def gumbel_(uniform: torch.Tensor) -> torch.Tensor:
    """g = -log(-log1p(-w)) in place on float32 uniforms."""
    return uniform.neg_().log1p_().neg_().log_().neg_()


def gumbel_noise(seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """g(s, i, v) for every v: float32 [rows, V] on the device of `seeds` (a fused Triton kernel on CUDA
    when Triton is present, torch integer ops otherwise: the same uniforms bit for bit)."""
    seeds = torch.as_tensor(seeds, dtype=torch.int64)
    seeds, positions = torch.broadcast_tensors(
        seeds, check_positions(torch.as_tensor(positions, dtype=torch.int64, device=seeds.device)))
    if seeds.is_cuda:
        from proofs import philox_triton

        if philox_triton.available():
            try:
                return philox_triton.gumbel_noise(seeds.contiguous(), positions.contiguous(), vocab_size)
            except Exception as exc:  # a kernel that cannot build here (no compiler, old driver): same bits below
                philox_triton.mark_broken(repr(exc))
                logging.getLogger(__name__).warning("Triton noise kernel unavailable (%s); using torch integer ops",
                                                    exc)
    out = torch.empty((seeds.shape[0], vocab_size), dtype=torch.float32, device=seeds.device)
    rows_per_chunk = max(1, NOISE_CHUNK_ELEMENTS // max(vocab_size, 1))
    for begin in range(0, seeds.shape[0], rows_per_chunk):
        end = begin + rows_per_chunk
        out[begin:end] = gumbel_(uniforms_from_words(noise_words(seeds[begin:end], positions[begin:end], vocab_size)))
    return out


def gumbel_at(seeds: torch.Tensor, positions: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """g(s, i, v) at given (seed, position, token) triples (1-D, broadcast together): float32."""
    seeds, positions, tokens = torch.broadcast_tensors(
        torch.as_tensor(seeds, dtype=torch.int64), check_positions(torch.as_tensor(positions, dtype=torch.int64)),
        torch.as_tensor(tokens, dtype=torch.int64))
    k0, k1 = _seed_key(seeds)
    words = torch.stack(philox4x32_10((tokens >> 2, positions, 0, 0), (k0, k1)), dim=-1)
    chosen = words.gather(-1, (tokens & 3).unsqueeze(-1)).squeeze(-1)
    return gumbel_(uniforms_from_words(chosen))


def nucleus_mask(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Boolean mask [..., V] of the top-p nucleus of softmax(logits / T)."""
    if top_p >= 1.0:
        return torch.ones_like(logits, dtype=torch.bool)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep_sorted = mass_before < top_p
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def sample_tokens(
    logits: torch.Tensor, seeds: torch.Tensor, positions: torch.Tensor | int, temperature: float, top_p: float
) -> torch.Tensor:
    """The tokens the sampling rule picks from rows of logits [rows, V] (any float dtype, computed in
    float32), row r at seed seeds[r] and decode position positions[r]: int64 [rows], on the logits' device."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    seeds = torch.as_tensor(seeds, dtype=torch.int64, device=logits.device)
    positions = torch.as_tensor(positions, dtype=torch.int64, device=logits.device).expand(seeds.shape)
    scores = gumbel_noise(seeds, positions, logits.shape[-1]).add_(logits.float() / temperature)
    if top_p < 1.0:
        scores.masked_fill_(~nucleus_mask(logits, temperature, top_p), -math.inf)
    return scores.argmax(dim=-1)


def sample_token(logits: torch.Tensor, seed: int, position: int, temperature: float, top_p: float) -> int:
    """The token the sampling rule picks from one row of logits [V] at (seed, position)."""
    return int(sample_tokens(logits[None], torch.tensor([seed]), position, temperature, top_p)[0])


class ReplayResult(BaseModel):
    """Outcome of replaying every sampled token of one completion."""

    model_config = ConfigDict(frozen=True)

    n_tokens: int
    failed_positions: list[int] = Field(default_factory=list)
    max_score_gap: float = 0.0
    """Largest (best Core score - sampled token's score) seen; <= 2 eps / T + 2 GUMBEL_TOLERANCE when passing."""
    margins: list[float] = Field(default_factory=list)
    """Per token: min(1, score gap / the bound), 1 outside the validator's own nucleus (proofs.margins)."""

    @property
    def margin_sum(self) -> float:
        return sum(self.margins)

    @property
    def passed(self) -> bool:
        return not self.failed_positions


def replay(
    logits: torch.Tensor,
    token_ids: list[int],
    seed: int,
    temperature: float,
    top_p: float,
    logit_tolerance: float,
    block_rows: int | None = None,
) -> ReplayResult:
    """Check every sampled token against recomputed logits [n, V] (the rule above), `block_rows`
    positions at a time (default: REPLAY_BLOCK_ELEMENTS // V), upcast to float32 block by block; each
    block's noise is drawn in one call on the logits' device (positions are independent); `replay_batch` replays
    many completions together."""
    if logits.dim() != 2 or logits.shape[0] != len(token_ids):
        raise SamplingSpecError(
            f"logits {tuple(logits.shape)} do not match {len(token_ids)} sampled tokens"
        )
    if temperature < 0 or not 0 < top_p <= 1 or logit_tolerance < 0:
        raise SamplingSpecError("need temperature >= 0, 0 < top_p <= 1, tolerance >= 0")
    n, vocab = logits.shape
    if n == 0:
        return ReplayResult(n_tokens=0)
    if not 0 <= seed < 2**SEED_BITS:
        raise SamplingSpecError(f"seed {seed} outside [0, 2^{SEED_BITS})")
    device = logits.device
    tokens = torch.tensor(token_ids, dtype=torch.long, device=device)
    if int(tokens.min()) < 0 or int(tokens.max()) >= vocab:
        return ReplayResult(n_tokens=n, failed_positions=list(range(n)), max_score_gap=math.inf, margins=[1.0] * n)
    elements = REPLAY_BLOCK_ELEMENTS if logits.device.type == "cpu" else DEVICE_REPLAY_BLOCK_ELEMENTS
    rows_per_block = block_rows or max(1, elements // vocab)
    seed_tensor = torch.tensor([seed], dtype=torch.int64, device=device)
    bad_parts: list[torch.Tensor] = []
    gap_maxima: list[torch.Tensor] = []
    margin_parts: list[torch.Tensor] = []
    for begin in range(0, n, rows_per_block):
        rows = logits[begin : begin + rows_per_block].float()
        block_tokens = tokens[begin : begin + rows_per_block]
        if temperature == 0:
            gap = rows.max(dim=-1).values - rows.gather(1, block_tokens[:, None]).squeeze(1)
            bound = 2 * logit_tolerance
            bad = gap > bound
            outside = torch.zeros_like(bad)
        else:
            positions = torch.arange(begin, begin + rows.shape[0], dtype=torch.int64, device=device)
            block_noise = gumbel_noise(seed_tensor.expand(rows.shape[0]), positions, vocab)
            gap, in_nucleus, outside = _replay_block(rows, block_tokens, block_noise, temperature, top_p,
                                                     logit_tolerance)
            bound = 2 * logit_tolerance / temperature + 2 * GUMBEL_TOLERANCE
            bad = (gap > bound) | ~in_nucleus
        bad_parts.append(bad.nonzero().flatten() + begin)
        gap_maxima.append(gap.max())
        margin = (gap / bound).clamp_(0, 1) if bound > 0 else (gap > 0).float()
        margin_parts.append(margin.masked_fill_(outside, 1.0))
    failed = torch.cat(bad_parts).tolist()  # the only copies to the host: verdict values
    return ReplayResult(n_tokens=n, failed_positions=failed, max_score_gap=float(torch.stack(gap_maxima).max()),
                        margins=torch.cat(margin_parts).tolist())


def replay_batch(
    logits: Sequence[torch.Tensor],
    token_ids: Sequence[list[int]],
    seeds: Sequence[int],
    temperature: float,
    top_p: float,
    logit_tolerance: float,
) -> list[ReplayResult]:
    """`replay` of many completions (each its logits [n_k, V], tokens and seed): the same results, with the rows of
    consecutive completions replayed together in blocks of up to REPLAY_BLOCK_ELEMENTS logits and their noise drawn
    in one call per block (a file's 128 short completions cost a few blocks, not 128 calls). A completion `replay`
    would refuse, one longer than a block, and any at temperature 0 go through `replay` on its own."""
    if not len(logits) == len(token_ids) == len(seeds):
        raise ValueError("one logits tensor, token list and seed per completion")
    if temperature < 0 or not 0 < top_p <= 1 or logit_tolerance < 0:
        raise SamplingSpecError("need temperature >= 0, 0 < top_p <= 1, tolerance >= 0")
    results: list[ReplayResult | None] = [None] * len(logits)
    groups: list[list[int]] = []
    room = 0  # rows the last group can still take
    for k, (rows, tokens, seed) in enumerate(zip(logits, token_ids, seeds)):
        usable = (temperature > 0 and rows.dim() == 2 and rows.shape[0] == len(tokens) > 0
                  and 0 <= seed < 2**SEED_BITS and 0 <= min(tokens) and max(tokens) < rows.shape[-1])
        if usable:
            elements = REPLAY_BLOCK_ELEMENTS if rows.device.type == "cpu" else DEVICE_REPLAY_BLOCK_ELEMENTS
            rows_per_block = max(1, elements // rows.shape[-1])
            usable = len(tokens) <= rows_per_block
        if not usable:
            results[k] = replay(rows, list(tokens), seed, temperature, top_p, logit_tolerance)
            continue
        last = logits[groups[-1][0]] if groups else None
        if last is not None and len(tokens) <= room and last.shape[-1] == rows.shape[-1] and last.device == rows.device:
            groups[-1].append(k)
            room -= len(tokens)
        else:
            groups.append([k])
            room = rows_per_block - len(tokens)
    bound = 2 * logit_tolerance / temperature + 2 * GUMBEL_TOLERANCE if groups else 0.0  # groups: temperature > 0
    for group in groups:
        device = logits[group[0]].device
        lengths = [len(token_ids[k]) for k in group]
        rows = torch.cat([logits[k].float() for k in group])
        tokens = torch.tensor([t for k in group for t in token_ids[k]], dtype=torch.long, device=device)
        row_seeds = torch.tensor([seeds[k] for k in group for _ in token_ids[k]], dtype=torch.int64, device=device)
        positions = torch.cat([torch.arange(n, dtype=torch.int64, device=device) for n in lengths])
        gap, in_nucleus, outside = _replay_block(rows, tokens, gumbel_noise(row_seeds, positions, rows.shape[-1]),
                                                 temperature, top_p, logit_tolerance)
        bad = ((gap > bound) | ~in_nucleus).tolist()  # the only copies to the host: verdict values
        margins = (gap / bound).clamp_(0, 1).masked_fill_(outside, 1.0).tolist()
        gaps = gap.tolist()
        begin = 0
        for k, n in zip(group, lengths):
            end = begin + n
            results[k] = ReplayResult(n_tokens=n, failed_positions=[j for j in range(n) if bad[begin + j]],
                                      max_score_gap=max(gaps[begin:end]), margins=margins[begin:end])
            begin = end
    return results  # type: ignore[return-value]  # every entry was set above


def _replay_block(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    noise: torch.Tensor,
    temperature: float,
    top_p: float,
    logit_tolerance: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(score gap, nucleus check, outside the validator's own nucleus) per row of a block of float32 logits
    [b, V]; `noise` holds the block's Gumbel noise and is turned into its scores in place."""
    scores = noise.add_(logits / temperature)
    token_scores = scores.gather(1, tokens[:, None]).squeeze(1)
    if top_p >= 1.0:
        everywhere = torch.ones_like(tokens, dtype=torch.bool)
        return scores.max(dim=-1).values - token_scores, everywhere, ~everywhere
    inflation = math.exp(2 * logit_tolerance / temperature)
    probs = torch.softmax(logits / temperature, dim=-1)
    ascending, order = logits.sort(dim=-1)
    sorted_probs = probs.gather(1, order)
    # suffix[j] = mass of the sorted entries j .. V-1; suffix[V] = 0
    suffix = torch.cat(
        [sorted_probs.flip(-1).cumsum(-1).flip(-1), torch.zeros(logits.shape[0], 1, device=logits.device)], dim=1
    )

    def mass_above(threshold: torch.Tensor) -> torch.Tensor:
        """mass'({u : l'[u] > threshold}) per row, for thresholds [b, k]."""
        return suffix.gather(1, torch.searchsorted(ascending, threshold.contiguous(), right=True))

    token_logit = logits.gather(1, tokens[:, None])
    in_nucleus = (mass_above(token_logit + 2 * logit_tolerance) / inflation < top_p).squeeze(1)
    outside_own = (mass_above(token_logit) >= top_p).squeeze(1)
    core = inflation * mass_above(logits - 2 * logit_tolerance) < top_p
    best = scores.masked_fill(~core, -math.inf).max(dim=-1).values
    return best - token_scores, in_nucleus, outside_own


def honest_margins(reference_logits: torch.Tensor, worker_logits: torch.Tensor, seeds: torch.Tensor,
                   temperature: float, top_p: float, logit_tolerance: float) -> torch.Tensor:
    """Margins (as `replay` reports them) under `reference_logits` [n, V] of the tokens an honest worker whose
    logits are `worker_logits` [n, V] samples at each position with each of `seeds` [S]: float32 [S, n].

    A margin depends on the noise only through the Gumbel draw at its (seed, position), so one prefill of an
    honest context by the worker and by the validator gives S honest margins per position: calibration measures
    millions of honest tokens from one forward pass (validator.calibrate.margin_null)."""
    n, vocab = reference_logits.shape
    reference, worker = reference_logits.float(), worker_logits.float().to(reference_logits.device)
    seeds = torch.as_tensor(seeds, dtype=torch.int64, device=reference.device)
    positions = torch.arange(n, dtype=torch.int64, device=reference.device)
    bound = 2 * logit_tolerance / temperature + 2 * GUMBEL_TOLERANCE
    own_nucleus = nucleus_mask(worker, temperature, top_p) if top_p < 1 else None
    elements = REPLAY_BLOCK_ELEMENTS if reference.device.type == "cpu" else DEVICE_REPLAY_BLOCK_ELEMENTS
    per_block = max(1, elements // max(vocab * n, 1))  # seeds whose n rows of noise are drawn in one call
    out = torch.empty((len(seeds), n), dtype=torch.float32)
    for begin in range(0, len(seeds), per_block):
        block = seeds[begin : begin + per_block]
        noise = gumbel_noise(block.repeat_interleave(n), positions.repeat(len(block)), vocab)
        scores = noise + worker.repeat(len(block), 1) / temperature
        if own_nucleus is not None:
            scores.masked_fill_(~own_nucleus.repeat(len(block), 1), -math.inf)
        tokens = scores.argmax(dim=-1)
        del scores
        gap, _, outside = _replay_block(reference.repeat(len(block), 1), tokens, noise, temperature, top_p,
                                        logit_tolerance)
        out[begin : begin + len(block)] = (gap / bound).clamp_(0, 1).masked_fill_(outside, 1.0).view(len(block), n).cpu()
    return out


def sample_index(nonce: int, row: int, rows_per_file: int) -> int:
    """The sample index of a file's row, as fed to `derive_seed`: a worker's files are numbered by nonce, so
    their seeds never repeat (even under one seed block)."""
    return nonce * rows_per_file + row
