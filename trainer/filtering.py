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


def informative_groups(rewards: torch.Tensor, tol: float | None = None) -> GroupFilterResult:
    """Keep the groups whose rewards are not all equal, by exact comparison.

    Rewards are exact (tasks.rewards: float32 values every party computes bit-identically, checked
    bit for bit by validators), so a group is informative iff two of its rewards differ at all; a
    tolerance would let a worker turn an all-wrong group into an informative one by shifting rewards
    inside it, and would drop a genuine spread smaller than it. The decision is made on the rewards
    themselves, not on normalised advantages. Dropped groups contribute nothing to the gradient but
    would still dilute the token-budget normalisation.

    `tol` is deprecated and must be None or 0 (trainer.config's `reward_spread_tol` is fixed at 0).
    """
    if tol not in (None, 0):
        raise ValueError(f"rewards are compared exactly: tol must be 0 (or omitted), got {tol}")
    differs = (rewards != rewards[:, :1]).any(dim=1)
    keep = [i for i, flag in enumerate(differs.tolist()) if flag]
    advantages = group_advantages(rewards)
    advantages[~differs] = 0.0
    return GroupFilterResult(keep=keep, advantages=advantages, dropped_zero_advantage=len(differs) - len(keep))
