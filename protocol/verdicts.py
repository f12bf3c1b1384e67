"""Reason codes of challenges and the evidence document a validator puts on IPFS.

The contract stores a challenge's `reasonCode` (uint16) and the digest of its evidence; these
codes are the protocol's shared vocabulary, used by validators, the demo and the dashboards.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from pydantic import BaseModel, Field, field_validator

from proofs.toploc_thresholds import MISSING_STAT

MAX_TEXT = 200
"""Longest string an evidence document carries: messages and statistics may quote worker bytes."""
MAX_ITEMS = 256
"""Longest list (and largest dict) an evidence document carries."""

TOPLOC_MISSING_STAT = MISSING_STAT
"""What a TOPLOC chunk's mantissa statistics read in evidence when no exponent matched (2^64): a sentinel, never a
measurement."""


class Reason(IntEnum):
    """Why a submission was challenged, cheapest check first."""

    UNAVAILABLE = 1        # the rollout file could not be fetched in time
    DIGEST_MISMATCH = 2    # the bytes do not hash to the submitted digest
    SCHEMA = 3             # not a valid rollout file
    WRONG_WORKER = 4       # the file names another worker (e.g. a resubmitted file)
    WRONG_STEP = 5         # header step/manifest disagree with the submission or the checkpoint
    STALE = 6              # the policy step is older than the pool's async level allows
    SAMPLE_COUNT = 7       # nSamples on-chain differs from the file or the run spec's prompts × group size
    ASSIGNMENT = 8         # prompts are not the ones assigned to (worker, nonce)
    REWARD = 9             # reported rewards differ from the task verifier's
    TERMINATION = 10       # completion ended without EOS before max_tokens, or implausible EOS
    SAMPLING = 11          # sampled tokens do not replay from the seeded noise and recomputed logits
    TOPLOC = 12            # activation proofs do not match the declared policy
    SEED = 13              # sampling seeds are not the derived ones
    DUPLICATE_ASSIGNMENT = 14  # unused since nonces are on-chain (each used once); code kept, never reassigned
    LOGPROBS = 15          # no longer issued (the logprob check protected nothing the trainer uses); reserved
    UNCHECKABLE = 16       # the file crashed or timed out the checker on every attempt
    WRONG_BINDING = 17     # the header's chain id, pool contract, pool id or nonce differ from the submission
    DISPUTE = 18           # a court pool's verdict overturned by its dispute committee (ValidatorCourt.REASON_DISPUTE)


class SpotCheck(BaseModel):
    """Which completions got the expensive checks, and the randomness they were drawn from: anyone
    re-derives `indices` as protocol.spotcheck.spot_check_indices(randomness, n, spot_check_bps,
    completion_tokens, min_checked_tokens) and `randomness` as spot_check_randomness(block_hash, work id)."""

    spot_check_bps: int = Field(gt=0, le=10_000)
    n: int = Field(ge=0, description="completions in the file")
    m: int = Field(ge=0, description="completions given the expensive checks: ceil(n · bps / 10000), or more "
                   "when the floor of checked tokens needs them")
    indices: list[int] = Field(description="the m chosen completions, sorted")
    min_checked_tokens: int = Field(0, ge=0, description="the run spec's floor of checked tokens (0: none)")
    completion_tokens: list[int] | None = Field(None, description="every completion's token count, which the "
                                                "draw past ceil(q·n) depends on (given when there is a floor)")
    submission_block: int | None = Field(None, description="block B of the WorkSubmitted event (None when q = 1)")
    block_hash: str | None = Field(None, pattern=r"^0x[0-9a-f]{64}$", description="hash of block B + 1")
    randomness: str | None = Field(None, pattern=r"^0x[0-9a-f]{64}$", description="keccak256(block_hash ‖ work id)")


class Evidence(BaseModel):
    """The document whose digest goes on-chain with a challenge."""

    schema_name: str = "proofswarm.evidence"
    version: int = 2
    work_id: str = Field(pattern=r"^0x[0-9a-f]{64}$")
    pool_id: int
    worker: str
    reason: str
    reason_code: int
    message: str
    failing_samples: list[int] = Field(default_factory=list)
    failing_chunks: dict[str, list[int]] = Field(default_factory=dict, description="sample index → chunk indices")
    statistics: dict[str, Any] = Field(default_factory=dict)
    thresholds: dict[str, Any] = Field(default_factory=dict)
    spot_check: SpotCheck | None = Field(None, description="set when the completion checks ran (on a spot check)")
    validator: str

    @field_validator("message", mode="before")
    @classmethod
    def _clip_message(cls, value: Any) -> Any:
        return clip_text(value) if isinstance(value, str) else value

    @field_validator("failing_samples", "failing_chunks", "statistics", "thresholds", mode="before")
    @classmethod
    def _bound(cls, value: Any) -> Any:
        return bounded(value)


def clip_text(text: str, limit: int = MAX_TEXT) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded(value: Any, depth: int = 0) -> Any:
    """A copy of JSON-like `value` with strings clipped, lists and dicts cut to MAX_ITEMS and
    nesting cut at 8 levels, so an evidence document always fits one IPFS object."""
    if isinstance(value, str):
        return clip_text(value)
    if depth >= 8:
        return "…"
    if isinstance(value, dict):
        return {clip_text(str(k)): bounded(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, (list, tuple)):
        return [bounded(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**64:
        return clip_text(str(value), 40)
    return value
