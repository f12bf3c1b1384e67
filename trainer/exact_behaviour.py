"""logp_behav for an exact pool's rows: the log-probabilities of the integer policy that sampled them.

An exact pool's workers draw from the integer form of each published policy (inference/exact.py, R5.7): the token is
the argmax of z + g over the vocabulary, with z = round(l · 2^16 / round(T · 2^16)) from the Q16 logits l and g a
fixed-point Gumbel draw, so the draw's distribution is softmax(z / 2^16) — up to the Gumbel table's resolution, which
the off-policy weight does not need. The trainer trains the float weights; its importance weight
π_prox / π_behav must divide by what actually sampled, so every row's logp_behav comes from that integer policy,
a current-policy row's too (π_behav ≠ π_prox there by the quantisation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from inference import exact
from trainer.batching import PackedBatch


def rule_logprobs(logits_q16: torch.Tensor, tokens: torch.Tensor, temperature: float) -> torch.Tensor:
    """log p(token) under the exact sampling rule at `temperature` > 0, from Q16 logits [n, V]; float32 [n]."""
    scale = round(temperature * (1 << exact.FRAC))
    if scale < 1:
        raise ValueError(f"temperature {temperature} has no exact-mode sampling distribution (greedy or below 2^-17)")
    z = exact.rdiv(logits_q16.to(torch.int64) * (1 << exact.FRAC), scale)
    logp = torch.log_softmax(z.to(torch.float64) / (1 << exact.FRAC), dim=-1)
    return logp.gather(-1, tokens[:, None].to(logp.device))[:, 0].to(torch.float32)


class ExactBehaviour:
    """The integer policies of the retained steps (quantised once a step) and the rows' log-probabilities under
    them."""

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self._policies: dict[int, exact.ExactPolicy] = {}

    def has(self, step: int) -> bool:
        """Whether step `step`'s integer policy is built."""
        return step in self._policies

    def prepare(self, step: int, model_of_step: Callable[[], torch.nn.Module]) -> exact.ExactPolicy:
        """Step `step`'s integer policy, quantised from `model_of_step()`'s float weights if not built yet."""
        policy = self._policies.get(step)
        if policy is None:
            policy = self._policies[step] = exact.quantise_policy(model_of_step())
        return policy

    def logprobs(self, step: int, model_of_step: Callable[[], torch.nn.Module], packed: PackedBatch) -> torch.Tensor:
        """[B, L] like packed.targets: each completion token's log-probability under step `step`'s integer policy
        (`model_of_step()` gives its float weights, asked only when the step is not quantised yet); NaN elsewhere."""
        policy = self.prepare(step, model_of_step)
        out = torch.full(packed.targets.shape, float("nan"), dtype=torch.float32)
        spans, pairs = [], []
        for row in range(packed.targets.shape[0]):
            positions = packed.loss_mask[row].nonzero()[:, 0].cpu()
            if positions.numel() == 0:
                continue
            first, last = int(positions[0]), int(positions[-1]) + 1
            spans.append((row, first, last))
            pairs.append((packed.inputs[row, :first + 1].tolist(), packed.targets[row, first:last].tolist()))
        # one left-padded prefill for the rows together: each row's integers are its own (R5.6)
        for (row, first, last), (_, completion), logits in zip(spans, pairs,
                                                               exact.prefill_logits_batch(policy, pairs)):
            out[row, first:last] = rule_logprobs(logits, torch.tensor(completion), self.temperature)
        return out.to(packed.targets.device)

    def keep(self, steps: Iterable[int]) -> None:
        """Forget the integer policies of steps no longer retained."""
        kept = set(steps)
        for step in [s for s in self._policies if s not in kept]:
            del self._policies[step]
