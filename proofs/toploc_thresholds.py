"""TOPLOC's chunk acceptance thresholds, apart from the prover and verifier so that run specs and the
chain-only commands can read them without importing torch (proofs.toploc re-exports them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MISSING_STAT = float(2**64)
"""Mantissa statistic reported when no exponent matches (as in the reference): a sentinel, never a measurement."""

DEFAULT_TOPK = 128
"""Points per chunk: the top-k entries of largest magnitude (the paper's and the reference's k)."""

COUNTED_FROM_TOKENS = 9
"""The chunk-count test counts chunks of at least this many tokens. A completion's first chunk holds the hidden state
of the prompt's last position, the same in every completion of the prompt (and of every shared first token): in a
1- or 2-token chunk that shared row is the chunk, and a group's chunks exceeded their level together (honest bf16
files of one prompt and 1–2 tokens were challenged ~1 time in 100); from 9 tokens a shared row is at most a ninth."""


class ChunkLimits(BaseModel):
    """Chunk limits for the chunks of up to `tokens` tokens (and more than the previous entry's), measured by
    `validator calibrate`. A chunk's honest statistics depend on how many hidden-state entries its top-k is
    drawn from: a chunk of one or two tokens (a completion's short last chunk) keeps small entries whose bf16
    rounding errors are relatively large (on a hidden-64 model a 1-token chunk's mean mantissa error is ~3x a
    32-token chunk's, and its 64 points show as many exponent flips as a full chunk's 128), so short chunks are
    populations of their own, not the full chunk's limits scaled by point count."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: int = Field(gt=0, description="the largest chunk length (tokens) these limits judge")
    max_exp_mismatches: int = Field(ge=0)
    max_mant_err_mean: float = Field(ge=0)
    max_mant_err_median: float = Field(ge=0)
    chunks: int = Field(0, ge=0, description="honest chunks the limits were fitted on")
    exceed_mean: float | None = Field(None, ge=0, description=(
        "the file's chunk-count test (proofs.toploc.chunk_count_test): the level of a chunk's mantissa-error mean "
        "that at most `exceed_rate` of honest chunks of this length exceed, in every calibrated population"))
    exceed_rate: float = Field(1.0, ge=0, le=1, description="upper bound on an honest chunk's P(mean > exceed_mean)")


class Thresholds(BaseModel):
    """Chunk acceptance thresholds. Defaults are the paper's: a chunk passes when at least
    90 of 128 exponents match, the mean mantissa error is <= 10 and its median <= 8."""

    model_config = ConfigDict(frozen=True)

    min_exp_matches: int = Field(90, ge=0)
    """Out of `per_points` points; scaled (rounded up) for chunks with fewer points."""
    per_points: int = Field(DEFAULT_TOPK, gt=0)
    max_mant_err_mean: float = Field(10.0, ge=0)
    max_mant_err_median: float = Field(8.0, ge=0)
    mean_excludes_max: bool = False
    """Leave the chunk's single largest mantissa error out of the mean: a near-tie for the last top-k
    place can swap under honest float noise, and the proof evaluated at the index the prover did not
    interpolate is a random value (its exponent mismatches, or ~1 time in 256 matches with an error up
    to 127). Strict float32 profiles need this; the paper's thresholds absorb it."""
    by_tokens: tuple[ChunkLimits, ...] = ()
    """Calibrated limits by chunk length, in increasing `tokens`; a chunk of t tokens is judged by the first entry
    with tokens >= t alone (the `mean_excludes_max` rule still applies); with none, by the fields above."""

    def for_tokens(self, tokens: int) -> ChunkLimits | None:
        """The calibrated limits of a chunk of `tokens` tokens, if calibrated."""
        return next((limits for limits in self.by_tokens if limits.tokens >= tokens), None)


PAPER_THRESHOLDS = Thresholds()
