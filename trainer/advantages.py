"""Group-relative advantages, computed by the trainer from the rewards alone."""

from __future__ import annotations

import torch

ADVANTAGE_EPS = 1e-6


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """(r − mean) / (std + 1e-6) within each prompt group.

    rewards: [n_groups, group_size]. std is the population standard deviation (divide by
    G, not G − 1), so a group of identical rewards gets exactly zero advantage.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 1:
        raise ValueError(f"rewards must be [n_groups, group_size], got shape {tuple(rewards.shape)}")
    rewards = rewards.float()
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=False)
    return (rewards - mean) / (std + ADVANTAGE_EPS)
