"""Termination check: a completion stops at its first EOS or exactly at max_tokens.

Rules, with n = number of completion tokens:
- EOS may only be the last token;
- finish_reason "eos": n >= 1, the last token is EOS, and p(EOS) >= min_eos_prob under the
  validator's recomputed distribution at that position (at the sampling temperature);
- finish_reason "length": n == max_tokens and the last token is not EOS.
Anything else (e.g. a completion cut short without EOS) fails.

The p(EOS) floor is off by default (0). The sampling replay checks every token, the final EOS included,
against the seeded draw, so an EOS put where it was not drawn fails there. A floor ε adds no protection
against that, but it rejects honest work: an honest sampler draws EOS at a position where p(EOS) < ε with
probability < ε, so a completion of L tokens fails with probability up to L·ε. For example, an untrained
32k-vocabulary policy has p(EOS) ≈ 1/V ≈ 3e-5, so a floor of 1e-4 rejected 4 of 8 honest files. A pool
may still set a floor, as long as it stays far below 1 / (tokens checked per file).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict

DEFAULT_MIN_EOS_PROB = 0.0


class TerminationResult(BaseModel):
    """Verdict of the termination check with the reason when it fails."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    reason: str = ""
    eos_prob: float | None = None


def check_termination(
    token_ids: list[int],
    finish_reason: Literal["eos", "length"] | str,
    max_tokens: int,
    eos_token_id: int | Collection[int],
    last_logits: torch.Tensor | None = None,
    temperature: float = 1.0,
    min_eos_prob: float = DEFAULT_MIN_EOS_PROB,
) -> TerminationResult:
    """Apply the rules above; `eos_token_id` is the stop token or every stop token of the checkpoint
    (then "EOS" means any of them and p(EOS) is their total probability); `last_logits` [V] are the
    recomputed logits of the last token."""
    stops = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id)
    n = len(token_ids)
    if n > max_tokens:
        return TerminationResult(passed=False, reason=f"{n} tokens exceed max_tokens {max_tokens}")
    if stops.intersection(token_ids[:-1]):
        return TerminationResult(passed=False, reason="EOS before the last token")
    if finish_reason == "length":
        if n != max_tokens:
            return TerminationResult(
                passed=False, reason=f"stopped at {n} of {max_tokens} tokens without EOS"
            )
        if token_ids[-1] in stops:
            return TerminationResult(passed=False, reason="finish_reason length but ends in EOS")
        return TerminationResult(passed=True)
    if finish_reason != "eos":
        return TerminationResult(passed=False, reason=f"unknown finish_reason {finish_reason!r}")
    if n == 0 or token_ids[-1] not in stops:
        return TerminationResult(passed=False, reason="finish_reason eos but no final EOS")
    if last_logits is None:
        return TerminationResult(passed=False, reason="no recomputed logits for the EOS position")
    scale = temperature if temperature > 0 else 1.0
    eos_prob = float(torch.softmax(last_logits.float() / scale, dim=-1)[sorted(stops)].sum())
    if not eos_prob >= min_eos_prob:
        return TerminationResult(
            passed=False,
            reason=f"EOS implausible: p={eos_prob:.3g} < {min_eos_prob:.3g}",
            eos_prob=eos_prob,
        )
    return TerminationResult(passed=True, eos_prob=eos_prob if math.isfinite(eos_prob) else None)
