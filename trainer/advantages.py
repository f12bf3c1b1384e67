"""Group-relative advantages, computed by the trainer from the rewards alone."""

from __future__ import annotations

import torch

ADVANTAGE_EPS = 1e-6


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """(r − mean) / (std + 1e-6) within each prompt group, as float32.

    rewards: [n_groups, group_size], float32 values (tasks.rewards). std is the population standard
    deviation (divide by G, not G − 1). The arithmetic is float64: the sum of G ≤ 2^29 copies of a
    float32 value is exact there, so a group of identical rewards has exactly its reward as mean and
    gets exactly zero advantage.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 1:
        raise ValueError(f"rewards must be [n_groups, group_size], got shape {tuple(rewards.shape)}")
    rewards = rewards.double()
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=False)
    return ((rewards - mean) / (std + ADVANTAGE_EPS)).float()
