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


REWARD_SPREAD_TOL = 1e-6


def informative_groups(rewards: torch.Tensor, tol: float = REWARD_SPREAD_TOL) -> GroupFilterResult:
    """Keep the groups whose raw rewards differ: max − min > tol.

    The decision is made on the rewards themselves, not on normalised advantages: the
    mean of identical non-dyadic rewards (16 × 0.7) is not exactly 0.7 in floating point,
    so (r − mean) / (std + eps) of such a group is a small non-zero number and the group
    would be kept with advantages made of rounding error. Dropped groups would contribute
    nothing to the gradient but still dilute the token-budget normalisation.
    """
    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    rewards = rewards.double()
    spread = rewards.amax(dim=1) - rewards.amin(dim=1)
    keep = [i for i, flag in enumerate((spread > tol).tolist()) if flag]
    advantages = group_advantages(rewards)
    advantages[spread <= tol] = 0.0
    return GroupFilterResult(keep=keep, advantages=advantages.float(), dropped_zero_advantage=len(spread) - len(keep))
