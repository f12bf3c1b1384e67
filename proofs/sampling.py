"""Seeded Gumbel-max sampling and its replay by a validator.

Sampling rule (shared by every backend). For a sequence with seed s, a CPU
`torch.Generator` seeded with s draws, at decode step i, u_i = torch.rand(V) (float32,
one call per step, in step order). The Gumbel noise is g_i = -log(-log(u_i)). With temperature
T > 0, logits l_i (float32) and top-p p, the token is

    argmax over v in Nucleus(l_i / T, p) of  l_i[v] / T + g_i[v]

which is an exact sample from softmax(l_i / T) restricted to the nucleus. T == 0 means greedy
(argmax of l_i, no noise drawn).

Replay with tolerance. The validator recomputes logits l' on its own hardware; they differ
from the worker's by numerical noise. With a logit tolerance eps (the largest |l - l'| the
pool accepts as noise), token t at step i passes when both hold:

    nucleus:  e^(-2 eps / T) * mass'({v : l'[v] > l'[t] + 2 eps}) < p
    argmax:   l'[t] / T + g[t] >= max over v in Core of (l'[v] / T + g[v]) - 2 eps / T
              where Core = {v : e^(2 eps / T) * mass'({u : l'[u] > l'[v] - 2 eps}) < p}

(mass' = probability under softmax(l'/T)). Claim: if |l[v] - l'[v]| <= eps for every v, an
honestly sampled token always passes (no false positives): every token the worker could
have excluded from its nucleus lies outside Core, every token in Core was in the worker's
nucleus, and the scores move by at most 2 eps / T. For p = 1 both sets are the whole
vocabulary and the rule reduces to the argmax condition.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct

import torch
from pydantic import BaseModel, ConfigDict, Field

_SEED_DOMAIN = b"proofswarm/sampling-seed/v1"
SEED_BITS = 63
REPLAY_BLOCK_ELEMENTS = 1 << 22
"""Logits replayed at once (block rows × vocab): each float32 work tensor of a block is at most 16 MiB
whatever the vocabulary or the completion's length (27 rows at V = 152,064; 128 rows at V = 32,768).
Every row is replayed on its own, so the block size changes no result bit."""


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


def derive_seed(pool_seed: bytes, worker: str, step: int, sample_index: int) -> int:
    """The sampling seed of one completion: the first 63 bits (big-endian) of
    HMAC-SHA256(key=pool_seed, msg=domain || address(20 B) || step (u64 BE) || index (u64 BE))."""
    if step < 0 or sample_index < 0:
        raise SamplingSpecError("step and sample_index must be non-negative")
    message = _SEED_DOMAIN + normalize_address(worker) + struct.pack(">QQ", step, sample_index)
    digest = hmac.new(pool_seed, message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


class GumbelStream:
    """The per-sequence noise source: call `next(vocab_size)` once per decode step."""

    def __init__(self, seed: int) -> None:
        if not 0 <= seed < 2**SEED_BITS:
            raise SamplingSpecError(f"seed {seed} outside [0, 2^{SEED_BITS})")
        self._generator = torch.Generator(device="cpu").manual_seed(seed)

    def next_uniform(self, vocab_size: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """The step's uniforms u (float32 [V], written into `out` if given); gumbel(u) turns them into
        the noise."""
        return torch.rand(vocab_size, generator=self._generator, dtype=torch.float32, out=out)

    def next(self, vocab_size: int) -> torch.Tensor:
        """The step's Gumbel noise g = -log(-log(u)) (float32 [V])."""
        return gumbel(self.next_uniform(vocab_size))


def gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """-log(-log(u)) elementwise, with u = 0 mapped to the smallest positive float32."""
    return gumbel_(uniform.clone())


def gumbel_(uniform: torch.Tensor) -> torch.Tensor:
    """`gumbel` in place (the same bits, without four temporaries the size of `uniform`)."""
    return uniform.clamp_min_(torch.finfo(torch.float32).tiny).log_().neg_().log_().neg_()


def nucleus_mask(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Boolean mask [..., V] of the top-p nucleus of softmax(logits / T)."""
    if top_p >= 1.0:
        return torch.ones_like(logits, dtype=torch.bool)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep_sorted = mass_before < top_p
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def sample_token(
    logits: torch.Tensor, noise: torch.Tensor | None, temperature: float, top_p: float
) -> int:
    """The token the sampling rule picks from one row of float32 logits [V]."""
    if temperature == 0:
        return int(logits.argmax())
    if noise is None:
        raise SamplingSpecError("temperature > 0 needs Gumbel noise")
    scores = logits.float() / temperature + noise
    scores = scores.masked_fill(~nucleus_mask(logits, temperature, top_p), -math.inf)
    return int(scores.argmax())


class ReplayResult(BaseModel):
    """Outcome of replaying every sampled token of one completion."""

    model_config = ConfigDict(frozen=True)

    n_tokens: int
    failed_positions: list[int] = Field(default_factory=list)
    max_score_gap: float = 0.0
    """Largest (best Core score - sampled token's score) seen; <= 2 eps / T when passing."""

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
    positions at a time (default: REPLAY_BLOCK_ELEMENTS // V), upcast to float32 block by block."""
    if logits.dim() != 2 or logits.shape[0] != len(token_ids):
        raise SamplingSpecError(
            f"logits {tuple(logits.shape)} do not match {len(token_ids)} sampled tokens"
        )
    if temperature < 0 or not 0 < top_p <= 1 or logit_tolerance < 0:
        raise SamplingSpecError("need temperature >= 0, 0 < top_p <= 1, tolerance >= 0")
    n, vocab = logits.shape
    if n == 0:
        return ReplayResult(n_tokens=0)
    tokens = torch.tensor(token_ids, dtype=torch.long)
    if int(tokens.min()) < 0 or int(tokens.max()) >= vocab:
        return ReplayResult(n_tokens=n, failed_positions=list(range(n)), max_score_gap=math.inf)
    rows_per_block = block_rows or max(1, REPLAY_BLOCK_ELEMENTS // vocab)
    stream = GumbelStream(seed) if temperature > 0 else None
    noise_buffer = torch.empty(min(n, rows_per_block), vocab) if stream is not None else None
    failed: list[int] = []
    max_gap = -math.inf
    for begin in range(0, n, rows_per_block):
        rows = logits[begin : begin + rows_per_block].float()
        block_tokens = tokens[begin : begin + rows_per_block]
        if stream is None:
            gap = rows.max(dim=-1).values - rows.gather(1, block_tokens[:, None]).squeeze(1)
            bad = gap > 2 * logit_tolerance
        else:
            noise = noise_buffer[: rows.shape[0]]
            for row in noise:
                stream.next_uniform(vocab, out=row)
            gap, in_nucleus = _replay_block(rows, block_tokens, noise, temperature, top_p, logit_tolerance)
            bad = (gap > 2 * logit_tolerance / temperature) | ~in_nucleus
        failed += (bad.nonzero().flatten() + begin).tolist()
        max_gap = max(max_gap, float(gap.max()))
    return ReplayResult(n_tokens=n, failed_positions=failed, max_score_gap=max_gap)


def _replay_block(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    noise: torch.Tensor,
    temperature: float,
    top_p: float,
    logit_tolerance: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(score gap, nucleus check) per row of a block of float32 logits [b, V]; `noise` holds the block's
    uniforms and is turned into its Gumbel noise, then its scores, in place."""
    scores = gumbel_(noise).add_(logits / temperature)
    token_scores = scores.gather(1, tokens[:, None]).squeeze(1)
    if top_p >= 1.0:
        return scores.max(dim=-1).values - token_scores, torch.ones_like(tokens, dtype=torch.bool)
    inflation = math.exp(2 * logit_tolerance / temperature)
    probs = torch.softmax(logits / temperature, dim=-1)
    ascending, order = logits.sort(dim=-1)
    sorted_probs = probs.gather(1, order)
    # suffix[j] = mass of the sorted entries j .. V-1; suffix[V] = 0
    suffix = torch.cat(
        [sorted_probs.flip(-1).cumsum(-1).flip(-1), torch.zeros(logits.shape[0], 1)], dim=1
    )

    def mass_above(threshold: torch.Tensor) -> torch.Tensor:
        """mass'({u : l'[u] > threshold}) per row, for thresholds [b, k]."""
        return suffix.gather(1, torch.searchsorted(ascending, threshold.contiguous(), right=True))

    token_logit = logits.gather(1, tokens[:, None])
    in_nucleus = (mass_above(token_logit + 2 * logit_tolerance) / inflation < top_p).squeeze(1)
    core = inflation * mass_above(logits - 2 * logit_tolerance) < top_p
    best = scores.masked_fill(~core, -math.inf).max(dim=-1).values
    return best - token_scores, in_nucleus


def sample_index(nonce: int, row: int, rows_per_file: int) -> int:
    """The per-step sample index of a file's row, as fed to `derive_seed`: files of one
    worker at one step are numbered by nonce, so their seeds never repeat."""
    return nonce * rows_per_file + row
