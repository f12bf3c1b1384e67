"""The GRPO loss with the INTELLECT-2 changes and decoupled PPO — the one place to learn it.

Three policies meet in an asynchronous step (decoupled PPO, as in AReaL):

    π_behav  the policy that sampled the completion (one to async_level steps old);
    π_prox   the proximal policy: the trainer's policy at the start of the current step;
    π_θ      the policy being trained (equal to π_prox before the step's first optimizer update).

For every completion token t of a sample with advantage A (shared by all its tokens):

    logp_θ(t)     = log softmax(logits / temperature)[token]
    logp_prox(t)  = the same under π_prox (no gradient)
    logp_behav(t) = the same under π_behav, recomputed by the trainer with the retained
                    policy of the rollout's step (never the worker's numbers)
    r             = exp(logp_θ − logp_prox)              # the trust region is around π_prox
    w             = min(exp(logp_prox − logp_behav), C)  # truncated IS weight, no gradient
    c1            = clamp(r, 0, δ)                       # two-sided clipping: δ bounds r,
    c2            = clamp(c1, 1 − ε, 1 + ε)              # which only matters when A < 0
    loss(t)       = w · max(−c1·A, −c2·A)                # the PPO pessimistic bound, reweighted

Why decoupled: with r = π_θ / π_behav, ε bounds the *total* drift since sampling, so a
rollout two steps old has many tokens clipped before the update even starts and their
gradient is lost. Clipping against π_prox bounds only this step's update; the staleness is
corrected by w instead, truncated at C (`is_weight_cap`) so a token the policy has since
made much likelier cannot dominate the batch. When π_prox = π_behav (a fresh rollout) w = 1
and the loss is the ordinary clipped one.

Updates per step (`optim.updates_per_step` = n, trainer/loop.py): the batch is cut into n
mini-batches of consecutive rows and each gets one optimizer update, with logp_prox computed
once, before the first. With n = 1, π_θ = π_prox at the point the gradient is taken, so r = 1,
nothing is clipped, and the update is the truncated-IS policy gradient w·A·∇logp_θ with no
trust region. With n > 1 the k-th mini-batch sees π_θ already moved by k − 1 updates: tokens
whose r left [1 − ε, 1 + ε] in the direction the advantage pushes get no gradient, so the clip
bounds how far one step moves the policy from π_prox, as in PPO. Each mini-batch's loss is
multiplied by n for its backward pass (it is 1/n of the batch's tokens over the batch's
budget), so every update has the gradient scale of a whole-batch update; the reported
statistics are those of the whole batch, each token counted at the update that saw it.

Without δ, a token whose ratio has exploded (r ≫ 1) in a group with negative advantage
contributes −r·A: an unbounded loss and gradient. Clamping r at δ = 4 caps it and zeroes
its gradient, which is what kept INTELLECT-2's long asynchronous run stable.

Token-level normalisation: the summed token losses are divided by a *constant* token
budget (batch samples × max completion tokens), not by each sequence's length, so long and
short completions weigh per token the same and the scale does not depend on the batch.

    total = Σ loss(t) / budget − entropy_coef · Σ H(t) / budget + kl_coef · Σ k3(t) / budget

with k3(t) = exp(logp_ref − logp_θ) − (logp_ref − logp_θ) − 1 against a frozen reference
policy (optional; 0 by default).

Micro-batches: every term is a sum over tokens divided by that same constant budget, so the batch
can be cut into micro-batches of rows whose losses are backpropagated one after another — the
accumulated gradient is the whole batch's, and `merge_loss_outputs` gives the whole batch's
statistics. The loop does that to bound memory (`TrainerConfig.micro_batch_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

import torch

# logp_θ and H(t) in chunks of positions (no float32 [tokens, V] tensor for the whole batch)
from inference.logprobs import token_logprobs, token_logprobs_and_entropy
from trainer.config import LossConfig

__all__ = ["LossConfig", "LossOutput", "clipped_token_loss", "grpo_loss", "k3_kl", "merge_loss_outputs",
           "token_logprobs", "token_logprobs_and_entropy", "truncated_is_weight"]


# How a statistic of one share of the batch combines with the others' into the whole batch's
# (trainer/distributed.py reads it; every LossOutput field must declare one):
#   sum         a sum over tokens divided by the constant token budget (the loss) or a count;
#   token_mean  a mean over the share's completion tokens: weighted by each share's token count;
#   max / min   an extreme over the share's tokens.
Reduction = Literal["sum", "token_mean", "max", "min"]


def reduction_of(name: str) -> Reduction:
    """How the LossOutput field `name` is combined across shares of a batch."""
    return LossOutput.__dataclass_fields__[name].metadata["reduce"]


@dataclass(frozen=True)
class LossOutput:
    """The scalar to backpropagate and detached statistics for logging."""

    loss: torch.Tensor = field(metadata={"reduce": "sum"})
    policy_loss: float = field(metadata={"reduce": "sum"})
    entropy: float = field(metadata={"reduce": "token_mean"})
    kl: float = field(metadata={"reduce": "token_mean"})
    clipped_fraction: float = field(metadata={"reduce": "token_mean"})
    delta_clamped_fraction: float = field(metadata={"reduce": "token_mean"})
    mean_ratio: float = field(metadata={"reduce": "token_mean"})
    is_weight_mean: float = field(metadata={"reduce": "token_mean"})
    is_weight_max: float = field(metadata={"reduce": "max"})  # before truncation
    is_weight_min: float = field(metadata={"reduce": "min"})  # before truncation
    is_truncated_fraction: float = field(metadata={"reduce": "token_mean"})

    n_tokens: float = field(metadata={"reduce": "sum"})  # completion tokens the means are over (merge weights)


def clipped_token_loss(
    logp: torch.Tensor, logp_prox: torch.Tensor, advantages: torch.Tensor, epsilon: float, delta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token max(−c1·A, −c2·A) with c1 = clamp(r, 0, δ), c2 = clamp(c1, 1−ε, 1+ε), r = π_θ/π_prox.

    `advantages` broadcasts against `logp` ([B, 1] for per-sample advantages).
    Returns the per-token loss and the ratio r (detached).
    """
    ratio = torch.exp(logp - logp_prox)
    c1 = torch.clamp(ratio, 0.0, delta)
    c2 = torch.clamp(c1, 1.0 - epsilon, 1.0 + epsilon)
    loss = torch.maximum(-c1 * advantages, -c2 * advantages)
    return loss, ratio.detach()


def truncated_is_weight(logp_prox: torch.Tensor, logp_behav: torch.Tensor, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """w = min(π_prox / π_behav, cap) per token, without gradient; also the untruncated ratio."""
    raw = torch.exp(logp_prox.detach() - logp_behav.detach())
    return torch.clamp(raw, max=cap), raw


def k3_kl(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(π_θ ‖ π_ref), per token; non-negative."""
    log_ratio = logp_ref - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


def grpo_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    loss_mask: torch.Tensor,
    advantages: torch.Tensor,
    logp_behav: torch.Tensor,
    temperature: float,
    token_budget: int,
    config: LossConfig,
    logp_ref: torch.Tensor | None = None,
    logp_prox: torch.Tensor | None = None,
) -> LossOutput:
    """Decoupled GRPO loss of one batch.

    logits [B, T, V] predict targets [B, T]; loss_mask [B, T] is 1 on completion tokens;
    advantages [B] (one per sample); logp_behav [B, T] under the sampling policies;
    token_budget is the constant divisor. logp_prox defaults to the trained policy's own
    logp (detached): right for the first optimizer update of a step.
    """
    if token_budget <= 0:
        raise ValueError(f"token_budget must be positive, got {token_budget}")
    mask = loss_mask.float()
    logp, token_h = token_logprobs_and_entropy(logits, targets, temperature)  # one pass over the logits
    if config.entropy_coef == 0:
        token_h = token_h.detach()  # a statistic only: backward skips it
    if logp_prox is None:
        logp_prox = logp.detach()
    weight, raw_weight = truncated_is_weight(logp_prox, logp_behav, config.is_weight_cap)
    per_token, ratio = clipped_token_loss(logp, logp_prox, advantages.unsqueeze(-1), config.epsilon, config.delta)
    policy_loss = (weight * per_token * mask).sum() / token_budget
    entropy = (token_h * mask).sum() / token_budget
    total = policy_loss - config.entropy_coef * entropy
    kl_value = torch.zeros(())
    if config.kl_coef > 0:
        if logp_ref is None:
            raise ValueError("kl_coef > 0 needs logp_ref from a reference policy")
        kl_value = (k3_kl(logp, logp_ref) * mask).sum() / token_budget
        total = total + config.kl_coef * kl_value
    n_raw = float(mask.sum())
    n_tokens = mask.sum().clamp(min=1.0)
    clipped = ((ratio < 1 - config.epsilon) | (ratio > 1 + config.epsilon)).float()

    def token_mean(x: torch.Tensor) -> float:
        return float((x * mask).sum() / n_tokens)

    return LossOutput(
        loss=total,
        policy_loss=float(policy_loss.detach()),
        entropy=float(entropy.detach() * token_budget / n_tokens),
        kl=float(kl_value.detach() * token_budget / n_tokens),
        clipped_fraction=token_mean(clipped),
        delta_clamped_fraction=token_mean((ratio > config.delta).float()),
        mean_ratio=token_mean(ratio),
        is_weight_mean=token_mean(weight),
        is_weight_max=float(raw_weight[mask > 0].max()) if mask.any() else 1.0,
        is_weight_min=float(raw_weight[mask > 0].min()) if mask.any() else 1.0,
        is_truncated_fraction=token_mean((raw_weight > config.is_weight_cap).float()),
        n_tokens=n_raw,
    )


def merge_loss_outputs(parts: list[LossOutput]) -> LossOutput:
    """The LossOutput of a batch from those of its micro-batches, each field as it declares (the same
    rules trainer/distributed.py applies across ranks): sums add, token means are weighted by n_tokens,
    maxima and minima take the extreme over the parts that hold tokens. The merged loss is detached
    (each part was backpropagated on its own)."""
    if not parts:
        raise ValueError("no micro-batches to merge")
    n = sum(p.n_tokens for p in parts)
    holding = [p for p in parts if p.n_tokens > 0] or parts[:1]
    merged: dict[str, object] = {}
    for f in fields(LossOutput):
        values = [getattr(p, f.name) for p in parts]
        kind = reduction_of(f.name)
        if f.name == "loss":
            merged["loss"] = sum((v.detach() for v in values), torch.zeros(()))
        elif kind == "sum":
            merged[f.name] = sum(values)
        elif kind == "token_mean":
            merged[f.name] = sum(v * p.n_tokens for v, p in zip(values, parts, strict=True)) / max(n, 1.0)
        else:
            merged[f.name] = (max if kind == "max" else min)(getattr(p, f.name) for p in holding)
    return LossOutput(**merged)
