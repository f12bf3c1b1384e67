"""Online filters the trainer applies to incoming rollouts: staleness and zero advantage."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainer.advantages import group_advantages


def is_stale(policy_step: int, trainer_step: int, async_level: int) -> bool:
    """A rollout made with the policy of `policy_step` is too old for `trainer_step`.

    The trainer at step s accepts rollouts from policies s − k … s (k = async_level);
    a policy step from the future is not stale here (the source is responsible for it).
    """
    if async_level < 0:
        raise ValueError(f"async_level must be >= 0, got {async_level}")
    return policy_step < trainer_step - async_level


@dataclass(frozen=True)
class GroupFilterResult:
    """Which groups carry a learning signal, and their advantages."""

    keep: list[int]
    advantages: torch.Tensor  # [n_groups, group_size], zero rows for dropped groups
    dropped_zero_advantage: int


def informative_groups(rewards: torch.Tensor) -> GroupFilterResult:
    """Drop groups whose advantages are all zero (every completion got the same reward).

    Such groups contribute nothing to the policy gradient but would still dilute the
    token-budget normalisation; they are dropped and counted.
    """
    advantages = group_advantages(rewards)
    nonzero = advantages.abs().amax(dim=1) > 0
    keep = [i for i, flag in enumerate(nonzero.tolist()) if flag]
    return GroupFilterResult(keep=keep, advantages=advantages, dropped_zero_advantage=len(nonzero) - len(keep))
