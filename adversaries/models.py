"""Changed copies of a policy: what an attacker samples from instead of the pool's checkpoint.

Each change works in place on `model` and returns it (so `quantised(load_policy(folder)[0])` reads as one step);
every one is deterministic. `quantised` and `perturbed_layer` compute in float32 and write the result back in the
weight's own dtype, so a float32 checkpoint and a bf16 one get the same change up to that final rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

PERTURBATION = 0.01
"""A perturbed weight is w · (1 + 0.01 · N(0, 1)): a 1 % change (a stale or fine-tuned copy)."""
OTHER_WEIGHTS_SEED = 12345


def quantised(model, bits: int = 8, group: int | None = None):
    """Symmetric quantisation of every matrix to `bits` bits (dequantised), one scale per output channel, or per
    `group` consecutive inputs of it (the grouped 4-bit formats GPU inference uses). Rounds in float32."""
    levels = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                w = p.float()
                rows = w.reshape(-1, group) if group else w
                scale = rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / levels
                p.copy_(((rows / scale).round().clamp(-levels, levels) * scale).reshape(p.shape).to(p.dtype))
    return model


def perturbed_layer(model, layer: int = 0, scale: float = PERTURBATION):
    """Every weight of decoder layer `layer` times (1 + scale · N(0, 1)), noise seeded by the layer (100 + layer)."""
    gen = torch.Generator().manual_seed(100 + layer)
    with torch.no_grad():
        for p in model.model.layers[layer].parameters():
            p.copy_((p.float() * (1 + scale * torch.randn(p.shape, generator=gen))).to(p.dtype))
    return model


def perturbed(model, scale: float = PERTURBATION, seed: int = 7):
    """Every weight of `model` times (1 + scale · N(0, 1)), the noise drawn in the weight's dtype from `seed`."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model


def other_weights(model, seed: int = OTHER_WEIGHTS_SEED):
    """A new model of `model`'s architecture and config, randomly initialised from `seed` (float32): a cheaper
    policy than the pool's, or none at all. Unlike the other changes, `model` itself is left as it is."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return type(model)(model.config).float().eval()


CHANGES: dict[str, Callable] = {
    "int8 weights": quantised,
    "int4 weights (groups of 32)": lambda model: quantised(model, 4, 32),
    "layer 0 x 1.01": perturbed_layer,
}
"""The changes bench.attacks samples from (with their own proofs or forged ones) and measures the logits of."""
