"""Turn (prompt, completion) token lists into padded tensors for teacher-forced passes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from inference.logprobs import token_logprobs


@dataclass(frozen=True)
class PackedBatch:
    """inputs [B, L]; targets [B, L] (the next token at each position); loss_mask [B, L]
    is 1 exactly where the target is a completion token."""

    inputs: torch.Tensor
    targets: torch.Tensor
    loss_mask: torch.Tensor

    def rows(self, index: slice | torch.Tensor) -> PackedBatch:
        """The batch of the selected rows (a slice gives views, no copy)."""
        return PackedBatch(self.inputs[index], self.targets[index], self.loss_mask[index])


def pack(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad_id: int) -> PackedBatch:
    """Right-pad prompt+completion rows; padding only ever follows real tokens, so a
    causal model needs no attention mask for it."""
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
    rows = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
    width = max(len(r) for r in rows) - 1
    inputs = torch.full((len(rows), width), pad_id, dtype=torch.long)
    targets = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, (row, prompt) in enumerate(zip(rows, prompts, strict=True)):
        n = len(row) - 1
        inputs[i, :n] = torch.tensor(row[:-1])
        targets[i, :n] = torch.tensor(row[1:])
        mask[i, len(prompt) - 1 : n] = 1.0
    return PackedBatch(inputs=inputs, targets=targets, loss_mask=mask)


def micro_batches(batch: PackedBatch, max_tokens: int) -> list[slice]:
    """Consecutive row slices of at most `max_tokens` padded positions each (at least one row each:
    a row wider than the budget is a micro-batch of its own). The [tokens, V] logits of one forward
    pass, and their gradient, scale with a micro-batch, not with the batch."""
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    n_rows, width = batch.inputs.shape
    step = max(1, max_tokens // max(width, 1))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def completion_logprobs(
    model: PreTrainedModel, batch: PackedBatch, temperature: float, micro_batch_tokens: int | None = None
) -> torch.Tensor:
    """Per-position log-probabilities of the targets, [B, L] (use with loss_mask). With
    `micro_batch_tokens`, one forward pass per micro-batch — for passes without gradient (under
    autograd every micro-batch's logits would be kept for backward)."""
    if micro_batch_tokens is None:
        logits = model(input_ids=batch.inputs).logits
        return token_logprobs(logits, batch.targets, temperature)
    return torch.cat([completion_logprobs(model, batch.rows(rows), temperature)
                      for rows in micro_batches(batch, micro_batch_tokens)])
