"""Sampling rule v2's noise (proofs.sampling) as one fused Triton kernel for CUDA devices: Philox4x32-10
words, the float32 uniform and the Gumbel transform for a [rows, V] block in a single pass over memory.

The integer part and the uniform are bit-identical to proofs.sampling's torch implementation (bench.gpu's
`uniform_bits_equal` compares them over 10^7 triples on the GPU; tests run the kernel on the CPU through
Triton's interpreter). The log1p/log of the transform may differ by a few ulps (GUMBEL_TOLERANCE).
"""

from __future__ import annotations

import os

import torch

from proofs.counter import check_positions

_BLOCK = 1024

# Triton 3.9 warns, on stderr at the first kernel it reads this knob for, that its default changes in 3.10: the kernel
# is integer-only, so fusion cannot change its bits; pinning today's default keeps it so and keeps CLIs at one line
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: proofs.sampling uses torch integer ops
    triton = None


_broken: list[str] = []


def available() -> bool:
    """Whether the kernel can be used: Triton imports (it ships with CUDA builds of torch) and the kernel has
    not failed to build on this machine (then proofs.sampling's torch path gives the same uniforms)."""
    return triton is not None and not _broken


def mark_broken(reason: str) -> None:
    """Stop using the kernel in this process (the torch path takes over, bit for bit on the uniforms)."""
    _broken.append(reason)


if triton is not None:

    @triton.jit
    def _philox_words(block_index, position, k0, k1):  # type: ignore[no-untyped-def]
        c0 = block_index.to(tl.uint32)
        c1 = position.to(tl.uint32)
        c2 = tl.zeros_like(c0)
        c3 = tl.zeros_like(c0)
        for _ in tl.static_range(10):
            hi0 = tl.umulhi(c0, 0xD2511F53)
            lo0 = tl.mul(c0, 0xD2511F53, sanitize_overflow=False)  # uint32 arithmetic wraps by design
            hi1 = tl.umulhi(c2, 0xCD9E8D57)
            lo1 = tl.mul(c2, 0xCD9E8D57, sanitize_overflow=False)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
            k0 = tl.add(k0, 0x9E3779B9, sanitize_overflow=False)
            k1 = tl.add(k1, 0xBB67AE85, sanitize_overflow=False)
        return c0, c1, c2, c3

    @triton.jit
    def _select_word(words, lane):  # type: ignore[no-untyped-def]
        c0, c1, c2, c3 = words
        return tl.where(lane == 0, c0, tl.where(lane == 1, c1, tl.where(lane == 2, c2, c3)))

    @triton.jit
    def _uniform(x):  # type: ignore[no-untyped-def]
        w = x.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10  # 2^-32, 2^-33
        return tl.minimum(w, 0.99999994039535522)  # 1 - 2^-24

    @triton.jit
    def noise_kernel(seeds_ptr, positions_ptr, out_ptr, vocab, BLOCK: tl.constexpr,  # type: ignore[no-untyped-def]
                     GUMBEL: tl.constexpr, LIBDEVICE: tl.constexpr):
        """Row `program_id(0)`'s uniforms w (GUMBEL False) or noise g (GUMBEL True) for one BLOCK of tokens."""
        row = tl.program_id(0)
        tokens = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        seed = tl.load(seeds_ptr + row)
        position = tl.load(positions_ptr + row)
        k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
        k1 = (seed >> 32).to(tl.uint32)
        words = _philox_words(tokens >> 2, tl.zeros_like(tokens) + position, k0, k1)
        value = _uniform(_select_word(words, tokens & 3))
        if GUMBEL:
            if LIBDEVICE:  # compiled for CUDA: libdevice's log1p and log (within 1-2 ulp)
                value = -tl.extra.libdevice.log(-tl.extra.libdevice.log1p(-value))
            else:  # Triton's interpreter (no libdevice): log1p(-w) by Kahan's identity over numpy's log
                one_minus = 1.0 - value
                log1p_neg = tl.where(one_minus == 1.0, -value, tl.log(one_minus) * (-value) / (one_minus - 1.0))
                value = -tl.log(-log1p_neg)
        tl.store(out_ptr + row.to(tl.int64) * vocab + tokens, value, mask=tokens < vocab)



def _launch(gumbel: bool, seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    check_positions(positions)  # the kernel reads a position as one uint32 counter word
    rows = seeds.shape[0]
    out = torch.empty((rows, vocab_size), dtype=torch.float32, device=seeds.device)
    if rows:
        grid = (rows, (vocab_size + _BLOCK - 1) // _BLOCK)
        noise_kernel[grid](seeds, positions, out, vocab_size, BLOCK=_BLOCK, GUMBEL=gumbel,
                           LIBDEVICE=os.environ.get("TRITON_INTERPRET") != "1")
    return out


def uniforms(seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """w(s, i, v) for every v < vocab_size: float32 [rows, V] (seeds, positions: int64 [rows])."""
    return _launch(False, seeds, positions, vocab_size)


def gumbel_noise(seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """g(s, i, v) for every v < vocab_size: float32 [rows, V] (seeds, positions: int64 [rows])."""
    return _launch(True, seeds, positions, vocab_size)
