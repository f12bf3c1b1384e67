"""Batched sampling from a Hugging Face causal LM with a KV cache, seeded Gumbel-max
draws per sequence, per-token log-probabilities and final hidden states.

Each sequence has its own torch.Generator seeded with its sampling seed; at every step it
draws one uniform vector over the vocabulary and picks argmax(logits / T + Gumbel noise),
which is an exact sample from softmax(logits / T). Anyone holding the seed and the logits
can replay the draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

# Keeps the Gumbel transform finite when a uniform draw is exactly 0.
_UNIFORM_FLOOR = 1e-20


@dataclass(frozen=True)
class Generation:
    """One sampled completion: its tokens (EOS included if it stopped), the sampling
    log-probability of each token, and the final hidden state (the LM head's input) that
    produced each token, [n_tokens, hidden]."""

    completion_ids: list[int]
    logprobs: list[float]
    hidden: torch.Tensor
    finish_reason: Literal["eos", "length"]


def gumbel_noise(generator: torch.Generator, vocab_size: int) -> torch.Tensor:
    """One step's Gumbel(0, 1) noise for one sequence, from its own generator."""
    uniform = torch.rand(vocab_size, generator=generator, dtype=torch.float64).clamp_min(_UNIFORM_FLOOR)
    return -torch.log(-torch.log(uniform)).float()


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    prompts: list[list[int]],
    max_tokens: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    seeds: list[int] | None = None,
) -> list[Generation]:
    """Sample one completion per prompt (temperature 0 = greedy; seeds required otherwise).

    Prompts are left-padded into one batch; generation stops when every sequence has
    emitted EOS or `max_tokens` tokens.
    """
    if temperature > 0 and (seeds is None or len(seeds) != len(prompts)):
        raise ValueError("sampling needs one seed per prompt")
    if not prompts or any(not p for p in prompts):
        raise ValueError("every prompt needs at least one token")
    batch, width = len(prompts), max(len(p) for p in prompts)
    device = next(model.parameters()).device
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long, device=device)
    attention = torch.zeros((batch, width), dtype=torch.long, device=device)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
        attention[row, width - len(prompt) :] = 1
    positions = (attention.cumsum(-1) - 1).clamp_min(0)
    generators = [torch.Generator().manual_seed(s) for s in seeds] if temperature > 0 and seeds else []

    tokens: list[list[int]] = [[] for _ in range(batch)]
    logprobs: list[list[float]] = [[] for _ in range(batch)]
    hidden: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    done = [False] * batch
    cache = None
    step_ids, step_positions = input_ids, positions
    for _ in range(max_tokens):
        out = model(
            input_ids=step_ids,
            attention_mask=attention,
            position_ids=step_positions,
            cache=cache,
            use_cache=True,
            output_hidden_states=True,
        )
        cache = out.past_key_values
        logits = out.logits[:, -1].float()
        last_hidden = out.hidden_states[-1][:, -1]
        if temperature > 0:
            logp = F.log_softmax(logits / temperature, dim=-1)
            noise = torch.stack([gumbel_noise(g, logits.shape[-1]) for g in generators]).to(device)
            chosen = (logp + noise).argmax(-1)
        else:
            logp = F.log_softmax(logits, dim=-1)
            chosen = logits.argmax(-1)
        chosen_logp = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        for row in range(batch):
            if done[row]:
                continue
            token = int(chosen[row])
            tokens[row].append(token)
            logprobs[row].append(float(chosen_logp[row]))
            hidden[row].append(last_hidden[row].detach().cpu())
            done[row] = token == eos_id
        if all(done):
            break
        step_ids = chosen.unsqueeze(-1)
        step_positions = step_positions[:, -1:] + 1
        attention = torch.cat([attention, torch.ones((batch, 1), dtype=attention.dtype, device=device)], dim=-1)
    return [
        Generation(
            completion_ids=tokens[row],
            logprobs=logprobs[row],
            hidden=torch.stack(hidden[row]),
            finish_reason="eos" if tokens[row][-1] == eos_id else "length",
        )
        for row in range(batch)
    ]
