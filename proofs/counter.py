"""The sampling noise's Philox counter words (docs/protocol.md R5.1): bounds every implementation checks alike (no
torch import: the run spec and the rollout reader hold the same bound)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

MAX_POSITION = 2**32 - 1
"""The counter's position word holds 0 ≤ i < 2^32: a position outside is refused, never truncated (the Triton
kernel's uint32 word would wrap it where torch's int64 would not)."""


def check_positions(positions: torch.Tensor) -> torch.Tensor:
    """`positions`, or ValueError when one lies outside [0, 2^32) (docs/protocol.md R5.1)."""
    if positions.numel() and bool(((positions < 0) | (positions > MAX_POSITION)).any()):
        raise ValueError(f"sampling positions must lie in [0, 2^32), got {positions.min().item()}.."
                         f"{positions.max().item()}")
    return positions
