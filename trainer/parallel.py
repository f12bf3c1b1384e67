"""The hooks through which the training loop runs on one process or on many.

The loop (trainer/loop.py) never talks to torch.distributed itself; it calls a `Parallel`:

- `wrap(model)` before the optimizer is built (FSDP2 / DDP wrapping),
- `full_state_dict(model)` for every published policy (gathered on rank 0; on every rank with `every_rank`),
- `local_shards(model)` / `write_local_shards(model, shards)` — this rank's piece of every parameter (its FSDP2
  shard; the whole parameter in one process or under DDP), read as views and written in place: what the retained
  policies are kept as, and how one is swapped into the training model to recompute logp_behav,
- `rows(n)` — the slice of the batch's rows this rank trains on, `loss_scale` — what the local
  loss is multiplied by before backward, `reduce(out, n_tokens)` — the batch's loss statistics
  from every rank's share,
- `clip_grad_norm(model, max_norm)`, `from_main(fn)` — rank 0 calls `fn` (reads the work source,
  decides to give up waiting) and every rank gets its result, `max_over_ranks(n)` — the largest of
  every rank's `n` (how many forward passes each must run: under FSDP2/DDP each is a collective),
- `save_checkpoint` / `load_checkpoint` — the resumable trainer state,
- `is_main` — only rank 0 publishes, writes metrics and reports to producers.

`SingleProcess` is the default and does exactly what a one-process trainer does;
`trainer/distributed.py` implements the same hooks on torch.distributed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from trainer.checkpoint import Checkpoint, load_latest_checkpoint, save_checkpoint
from trainer.loss import LossOutput

T = TypeVar("T")


class Parallel(Protocol):
    """How the loop's model, batch, checkpoints and side effects are spread over processes."""

    rank: int
    world_size: int

    @property
    def is_main(self) -> bool: ...

    @property
    def loss_scale(self) -> float: ...

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module: ...

    def full_state_dict(self, model: torch.nn.Module, every_rank: bool = False) -> dict[str, torch.Tensor]: ...

    def local_shards(self, model: torch.nn.Module) -> dict[str, torch.Tensor]: ...

    def write_local_shards(self, model: torch.nn.Module, shards: dict[str, torch.Tensor]) -> None: ...

    def rows(self, n_rows: int) -> slice: ...

    def reduce(self, out: LossOutput, n_tokens: float) -> LossOutput: ...

    def reduce_mean(self, value: float, weight: float) -> float: ...

    def clip_grad_norm(self, model: torch.nn.Module, max_norm: float) -> float: ...

    def from_main(self, fn: Callable[[], T]) -> T: ...

    def max_over_ranks(self, value: int) -> int: ...

    def save_checkpoint(self, root: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        tensors: dict[str, Any], trainer: dict[str, Any]) -> None: ...

    def load_checkpoint(self, root: Path, model: torch.nn.Module,
                        optimizer: torch.optim.Optimizer) -> Checkpoint | None: ...


class SingleProcess:
    """One process holds the whole model and the whole batch."""

    rank = 0
    world_size = 1
    is_main = True
    loss_scale = 1.0

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def full_state_dict(self, model: torch.nn.Module, every_rank: bool = False) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    def local_shards(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {name: p.detach() for name, p in model.named_parameters()}

    @torch.no_grad()
    def write_local_shards(self, model: torch.nn.Module, shards: dict[str, torch.Tensor]) -> None:
        for name, p in model.named_parameters():
            p.copy_(shards[name])

    def rows(self, n_rows: int) -> slice:
        return slice(0, n_rows)

    def reduce(self, out: LossOutput, n_tokens: float) -> LossOutput:
        return out

    def reduce_mean(self, value: float, weight: float) -> float:
        return value

    def clip_grad_norm(self, model: torch.nn.Module, max_norm: float) -> float:
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))

    def from_main(self, fn: Callable[[], T]) -> T:
        return fn()

    def max_over_ranks(self, value: int) -> int:
        return value

    def save_checkpoint(self, root: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        tensors: dict[str, Any], trainer: dict[str, Any]) -> None:
        save_checkpoint(root, step, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), **tensors},
                        trainer)

    def load_checkpoint(self, root: Path, model: torch.nn.Module,
                        optimizer: torch.optim.Optimizer) -> Checkpoint | None:
        ckpt = load_latest_checkpoint(root)
        if ckpt is not None:
            model.load_state_dict(ckpt.tensors["model"])
            optimizer.load_state_dict(ckpt.tensors["optimizer"])
        return ckpt
