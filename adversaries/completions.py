"""Dishonest changes to completions that work on either form a completion takes: a rollout file's
`protocol.rollouts.RolloutSample` or the proof suite's `inference.verify.CompletionRecord` (both carry
`proofs` and a `seed`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

Row = TypeVar("Row")


def chosen_seeds(n: int) -> list[int]:
    """The seeds of `n` completions as an attacker picks them (7, 8, …) instead of deriving them: seed grinding,
    fishing for lucky completions."""
    return [7 + i for i in range(n)]


def with_proofs_of(rows: Sequence[Row], donors: Sequence[Row]) -> list[Row]:
    """Each row carrying its donor's proofs (the donor's first, then its own, as many as it had): proofs copied
    from another completion."""
    return [r.model_copy(update={"proofs": (d.proofs + r.proofs)[: len(r.proofs)]}) for r, d in zip(rows, donors)]
