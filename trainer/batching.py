"""Turn (prompt, completion) token lists into padded tensors for teacher-forced passes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from trainer.loss import token_logprobs


@dataclass(frozen=True)
class PackedBatch:
    """inputs [B, L]; targets [B, L] (the next token at each position); loss_mask [B, L]
    is 1 exactly where the target is a completion token."""

    inputs: torch.Tensor
    targets: torch.Tensor
    loss_mask: torch.Tensor


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


def completion_logprobs(model: PreTrainedModel, batch: PackedBatch, temperature: float) -> torch.Tensor:
    """Per-position log-probabilities of the targets, [B, L] (use with loss_mask)."""
    logits = model(input_ids=batch.inputs).logits
    return token_logprobs(logits, batch.targets, temperature)
