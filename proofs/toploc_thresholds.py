"""TOPLOC's chunk acceptance thresholds, apart from the prover and verifier so that run specs and the
chain-only commands can read them without importing torch (proofs.toploc re-exports them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TOPK = 128
"""Points per chunk: the top-k entries of largest magnitude (the paper's and the reference's k)."""


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


PAPER_THRESHOLDS = Thresholds()
