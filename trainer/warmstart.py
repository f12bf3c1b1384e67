"""Supervised warm start: teach a fresh policy the task's answer format before RL."""

from __future__ import annotations

import random
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from tasks.base import Task
from tasks.encoding import encode_prompt
from trainer.batching import pack


def supervised_warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    task: Task,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Cross-entropy on prompt → answer + EOS for `steps` steps on train problems drawn
    by `seed`; returns the loss per step (each also to `on_step(step, loss)`, steps counted from 1). Leaves the
    model in eval mode."""
    rng = random.Random(seed)
    n_problems = task.size() or 1_000_000
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        problems = [task.problem(rng.randrange(n_problems)) for _ in range(batch_size)]
        prompts = [encode_prompt(tokenizer, p.prompt) for p in problems]
        answers = [[*tokenizer.encode(p.answer, add_special_tokens=False), tokenizer.eos_token_id] for p in problems]
        batch = pack(prompts, answers, tokenizer.pad_token_id)
        logits = model(input_ids=batch.inputs).logits
        per_token = F.cross_entropy(logits.transpose(1, 2), batch.targets, reduction="none")
        loss = (per_token * batch.loss_mask).sum() / batch.loss_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(len(losses), losses[-1])
    model.eval()
    return losses
