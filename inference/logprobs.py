"""Log-probabilities and entropies of next-token distributions, computed in chunks of positions.

    logp(t) = logits[t] / T − logsumexp(logits / T)        H = −Σ_v p_v · log p_v

At a real vocabulary (V = 152k) a float32 log-softmax of a batch is the largest tensor of a training
step, and autograd keeps it (and the tempered copy it came from) for backward. Here each chunk of
positions is upcast, reduced and dropped in turn; backward recomputes the chunk's softmax from the
saved logits and two floats per position, so the only [positions, V] tensors are the logits and
their gradient, both in the logits' own dtype. Values and gradients equal those of the plain
`log_softmax(logits.float() / T)` to float rounding (tests/unit/inference/test_logprobs.py).

Shared by every room that scores tokens: the trainer's loss and logp passes use it; a verifier's
recomputed logprobs could too.
"""

from __future__ import annotations

import torch

CHUNK_ELEMENTS = {"cpu": 1 << 20}
"""Elements of one chunk by device type: 4 MiB of float32 on a CPU (a chunk stays in cache, which is
faster than bigger ones); 64 MiB elsewhere (`DEFAULT_CHUNK_ELEMENTS`, fewer kernel launches)."""
DEFAULT_CHUNK_ELEMENTS = 1 << 24


def _rows_per_chunk(flat: torch.Tensor, chunk_rows: int | None) -> int:
    if chunk_rows is not None:
        if chunk_rows <= 0:
            raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
        return chunk_rows
    return max(1, CHUNK_ELEMENTS.get(flat.device.type, DEFAULT_CHUNK_ELEMENTS) // max(flat.shape[-1], 1))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)  # bf16/fp16 → fp32; fp64 stays fp64


class _LogprobsEntropy(torch.autograd.Function):
    """(logp [N], H [N]) of flat logits [N, V]; H is left empty unless `with_entropy`. Each pass reuses
    one or two chunk-sized work buffers (backward works in the gradient itself when dtypes agree)."""

    @staticmethod
    def forward(ctx, flat: torch.Tensor, targets: torch.Tensor, temperature: float, rows: int,
                with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
        n, vocab = flat.shape
        dtype = _compute_dtype(flat.dtype)
        logp = torch.empty(n, dtype=dtype, device=flat.device)
        lse = torch.empty_like(logp)
        entropy = torch.empty(n if with_entropy else 0, dtype=dtype, device=flat.device)
        work = torch.empty(min(rows, n), vocab, dtype=dtype, device=flat.device)
        exps = torch.empty_like(work) if with_entropy else None
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            y = work[: stop - start].copy_(flat[start:stop])
            if temperature != 1.0:
                y.div_(temperature)
            top = y.amax(-1, keepdim=True)
            y.sub_(top)  # y = x − max: every exp ≤ 1
            picked = y.gather(-1, targets[start:stop, None]).squeeze(-1)
            if exps is not None:
                e = torch.exp(y, out=exps[: stop - start])
                total = e.sum(-1)
                log_total = total.log()
                # H = −Σ p (y − log Σe) = log Σe − Σ e·y / Σe
                entropy[start:stop] = log_total - e.mul_(y).sum(-1) / total
            else:
                log_total = y.exp_().sum(-1).log_()
            logp[start:stop] = picked - log_total
            lse[start:stop] = top.squeeze(-1) + log_total
        ctx.save_for_backward(flat, targets, lse, entropy)
        ctx.temperature, ctx.rows = temperature, rows
        ctx.set_materialize_grads(False)
        return logp, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_logp: torch.Tensor | None, grad_entropy: torch.Tensor | None):
        flat, targets, lse, entropy = ctx.saved_tensors
        if entropy.numel() == 0:
            grad_entropy = None  # not computed, so not differentiated
        if grad_logp is None and grad_entropy is None:
            return None, None, None, None, None
        n, vocab = flat.shape
        dtype, rows, temperature = lse.dtype, ctx.rows, ctx.temperature
        grad = torch.empty_like(flat)
        work = None if flat.dtype == dtype else torch.empty(min(rows, n), vocab, dtype=dtype, device=flat.device)
        probs = None if grad_entropy is None else torch.empty(min(rows, n), vocab, dtype=dtype, device=flat.device)
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            out = grad[start:stop] if work is None else work[: stop - start]
            log_p = out.copy_(flat[start:stop])
            if temperature != 1.0:
                log_p.div_(temperature)
            log_p.sub_(lse[start:stop, None])
            if probs is None:
                # d logp_t / d x = onehot(t) − p
                g = grad_logp[start:stop, None]
                dx = log_p.exp_().mul_(-g).scatter_add_(-1, targets[start:stop, None], g)
            else:
                # d H / d x_v = −p_v · (log p_v + H)
                p = torch.exp(log_p, out=probs[: stop - start])
                dx = log_p.add_(entropy[start:stop, None]).mul_(p).mul_(-grad_entropy[start:stop, None])
                if grad_logp is not None:
                    g = grad_logp[start:stop, None]
                    dx.sub_(p.mul_(g)).scatter_add_(-1, targets[start:stop, None], g)
            if temperature != 1.0:
                dx.div_(temperature)  # d x / d logits = 1 / T
            if work is not None:
                grad[start:stop] = dx
        return grad, None, None, None, None


def _apply(logits: torch.Tensor, targets: torch.Tensor | None, temperature: float, chunk_rows: int | None,
           with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    flat = logits.reshape(-1, logits.shape[-1])  # a view for contiguous logits (a model's output)
    flat_targets = (targets.reshape(-1) if targets is not None
                    else torch.zeros(flat.shape[0], dtype=torch.long, device=flat.device))
    logp, entropy = _LogprobsEntropy.apply(flat, flat_targets, float(temperature), _rows_per_chunk(flat, chunk_rows),
                                           with_entropy)
    shape = logits.shape[:-1]
    return logp.reshape(shape), entropy.reshape(shape) if with_entropy else entropy


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                   chunk_rows: int | None = None) -> torch.Tensor:
    """log softmax(logits / T)[targets] ([..., V], [...] → [...], float32 or wider), in chunks of
    `chunk_rows` positions (default: CHUNK_ELEMENTS // V); differentiable in `logits`."""
    return _apply(logits, targets, temperature, chunk_rows, with_entropy=False)[0]


def token_entropy(logits: torch.Tensor, temperature: float = 1.0, chunk_rows: int | None = None) -> torch.Tensor:
    """Entropy of softmax(logits / T) at every position ([..., V] → [...]), in chunks; differentiable."""
    return _apply(logits, None, temperature, chunk_rows, with_entropy=True)[1]


def token_logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                               chunk_rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`token_logprobs` and `token_entropy` in one pass over the logits; both differentiable (backward
    skips the entropy's share when nothing uses it with a gradient)."""
    return _apply(logits, targets, temperature, chunk_rows, with_entropy=True)
