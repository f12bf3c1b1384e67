"""Sampling rule v2: Philox4x32-10's published known answers, the noise g(s, i, v) of every implementation
(the independent reference in tests/support/sampling_reference.py, torch on the CPU, the Triton kernel through
Triton's interpreter, torch and Triton on CUDA when a GPU is present) agreeing bit for bit on the uniforms,
the rule's bounds, and the vLLM logits processor's arithmetic with a stand-in for vLLM's batch."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from inference.vllm_backend import _RequestState, sample_rows
from proofs.sampling import (
    G_MAX,
    G_MIN,
    GUMBEL_TOLERANCE,
    REPLAY_BLOCK_ELEMENTS,
    W_MAX,
    W_MIN,
    derive_seed,
    gumbel_,
    gumbel_at,
    gumbel_noise,
    noise_words,
    philox4x32_10,
    replay,
    replay_batch,
    sample_index,
    sample_token,
    sample_tokens,
    uniforms_from_words,
)
from protocol.digest import hex_text
from protocol.runspec import SamplingSpec
from tests.support import sampling_reference as reference
from tests.support.paths import ROOT


# Random123's kat_vectors for philox4x32 with 10 rounds: (counter, key, output)
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_philox_matches_the_published_known_answers(counter, key, expected) -> None:
    assert reference.philox4x32_10(counter, key) == expected
    assert tuple(int(w) for w in philox4x32_10(counter, key)) == expected


def test_seeds_match_the_reference_written_from_the_rule() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        pool_seed, pin = rng.bytes(32), rng.bytes(32)
        worker = hex_text(rng.bytes(20))
        nonce, rows = int(rng.integers(0, 2**40)), int(rng.integers(1, 512))
        row = int(rng.integers(0, rows))
        assert derive_seed(pool_seed, worker, pin, sample_index(nonce, row, rows)) == \
            reference.seed(pool_seed, worker, pin, nonce, rows, row)


def test_numpy_reference_gives_the_zero_known_answer() -> None:
    """Seed 0, position 0, tokens 0..3 are Philox's counter (0, 0, 0, 0) under key (0, 0)."""
    words = reference.words_np(np.zeros(4, dtype=np.uint64), np.zeros(4, dtype=np.int64), np.arange(4))
    assert tuple(int(w) for w in words) == KNOWN_ANSWERS[0][2]


def _random_triples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63, size=n, dtype=np.int64)
    positions = rng.integers(0, 2**32, size=n, dtype=np.int64)
    tokens = rng.integers(0, 2**31, size=n, dtype=np.int64)
    # the extremes of every input
    seeds[:4] = [0, 1, 2**32, 2**63 - 1]
    positions[:4] = [0, 2**32 - 1, 1, 2**31]
    tokens[:4] = [0, 3, 2**31 - 1, 4]
    return seeds, positions, tokens


def test_torch_agrees_with_the_reference_on_a_million_triples() -> None:
    seeds, positions, tokens = _random_triples(1_000_000, 7)
    expected_words = reference.words_np(seeds, positions, tokens)
    t_seeds, t_positions, t_tokens = (torch.from_numpy(a) for a in (seeds, positions, tokens))
    k0, k1 = t_seeds & 0xFFFFFFFF, t_seeds >> 32
    lanes = torch.stack(philox4x32_10((t_tokens >> 2, t_positions, 0, 0), (k0, k1)), -1)
    words = lanes.gather(-1, (t_tokens & 3)[:, None])[:, 0]
    assert np.array_equal(words.numpy().astype(np.uint64), expected_words)
    expected_uniforms = reference.uniforms_np(expected_words)
    uniforms = uniforms_from_words(words)
    assert np.array_equal(uniforms.numpy().view(np.uint32), expected_uniforms.view(np.uint32))
    noise = gumbel_at(t_seeds, t_positions, t_tokens).numpy()
    assert np.abs(noise - reference.gumbel_np(expected_uniforms)).max() <= GUMBEL_TOLERANCE
    assert np.array_equal(noise.view(np.uint32), gumbel_(uniforms).numpy().view(np.uint32))


def test_dense_rows_equal_the_pointwise_noise() -> None:
    seeds = torch.tensor([5, 2**62 + 11, 2**63 - 1])
    positions = torch.tensor([0, 17, 2**32 - 1])
    vocab = 1003  # not a multiple of 4
    dense = gumbel_noise(seeds, positions, vocab)
    tokens = torch.arange(vocab)
    for row in range(3):
        point = gumbel_at(seeds[row], positions[row], tokens)
        assert torch.equal(dense[row], point)
    words = noise_words(seeds, positions, vocab)
    assert [int(words[1, v]) for v in (0, 5, 1002)] == [
        reference.word(int(seeds[1]), int(positions[1]), v) for v in (0, 5, 1002)]


def test_uniforms_and_noise_are_bounded() -> None:
    extremes = uniforms_from_words(torch.tensor([0, 1, 2**24, 2**32 - 129, 2**32 - 1]))
    assert float(extremes[0]) == W_MIN and float(extremes.max()) == np.float32(W_MAX)
    assert bool((extremes > 0).all()) and bool((extremes < 1).all())
    noise = gumbel_(extremes.clone())
    assert G_MIN <= float(noise.min()) and float(noise.max()) <= G_MAX
    assert float(noise.max()) > G_MAX - 1e-4 and float(noise.min()) < G_MIN + 1e-4


def test_noise_is_standard_gumbel() -> None:
    """Mean (Euler's gamma) and variance (pi^2 / 6) of 4M draws, within 6 standard errors."""
    noise = gumbel_noise(torch.arange(4096) * 7919, torch.arange(4096), 1024).double()
    n = noise.numel()
    assert abs(float(noise.mean()) - 0.5772157) < 6 * (1.6449 / n) ** 0.5
    assert abs(float(noise.var()) - 1.6449341) < 6 * (2.0 * 1.6449**2 * 2.4 / n) ** 0.5


def test_sample_token_is_the_batched_rule_row_by_row() -> None:
    gen = torch.Generator().manual_seed(3)
    logits = 2 * torch.randn(32, 300, generator=gen)
    seeds = torch.randint(0, 2**62, (32,), generator=gen)
    for temperature, top_p in ((1.0, 1.0), (0.7, 0.9), (0.0, 1.0)):
        batched = sample_tokens(logits, seeds, 9, temperature, top_p)
        assert batched.tolist() == [sample_token(logits[r], int(seeds[r]), 9, temperature, top_p) for r in range(32)]


def _run_interpreted(code: str) -> str:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_triton_kernel_gives_the_torch_uniforms_bit_for_bit() -> None:
    """The CUDA kernel's code, run on the CPU by Triton's interpreter (the GPU run is bench.gpu's
    uniform_bits_equal and the CUDA test below)."""
    pytest.importorskip("triton", reason="Triton ships with CUDA builds of torch only")
    out = _run_interpreted(
        "import torch\n"
        "from proofs import philox_triton\n"
        "from proofs.sampling import gumbel_noise, noise_words, uniforms_from_words\n"
        "seeds = torch.tensor([0, 123, 2**32, 2**62 + 5, 2**63 - 1])\n"
        "positions = torch.tensor([0, 7, 2**31 + 3, 2**32 - 1, 1])\n"
        "u = philox_triton.uniforms(seeds, positions, 2051)\n"
        "ref = uniforms_from_words(noise_words(seeds, positions, 2051))\n"
        "g = philox_triton.gumbel_noise(seeds, positions, 2051)\n"
        "print(bool(torch.equal(u.view(torch.int32), ref.view(torch.int32))),"
        " float((g - gumbel_noise(seeds, positions, 2051)).abs().max()))\n")
    equal, gap = out.split()
    assert equal == "True" and float(gap) <= GUMBEL_TOLERANCE


def test_every_implementation_refuses_a_position_outside_one_counter_word() -> None:
    """R5.1: 0 ≤ i < 2^32. The Triton kernel reads the position as a uint32 word, torch as int64: a position past
    2^32 − 1 would truncate in one and not the other, so each refuses it (the kernel's launcher before any launch)."""
    seeds = torch.tensor([5, 6])
    for bad in (2**32, -1):
        positions = torch.tensor([0, bad])
        for call in (lambda: noise_words(seeds, positions, 16), lambda: gumbel_noise(seeds, positions, 16),
                     lambda: gumbel_at(seeds, positions, torch.tensor([3, 3]))):
            with pytest.raises(ValueError, match="2\\^32"):
                call()
        with pytest.raises(ValueError, match="2\\^32"):
            reference.word(5, bad, 3)
        with pytest.raises(ValueError, match="2\\^32"):
            reference.words_np(np.array([5], dtype=np.uint64), np.array([bad], dtype=np.int64), np.array([3]))
    assert noise_words(seeds, torch.tensor([0, 2**32 - 1]), 16).shape == (2, 16)
    from proofs import philox_triton

    with pytest.raises(ValueError, match="2\\^32"):
        philox_triton.uniforms(seeds, torch.tensor([0, 2**32]), 16)
    with pytest.raises(ValueError, match="less than or equal to 4294967296"):
        SamplingSpec(max_tokens=2**32 + 1)


def test_triton_kernel_compiles_for_a_cuda_gpu_without_one() -> None:
    """The compiled path (libdevice's log1p and log, uint32 Philox arithmetic) as PTX for sm_90, no GPU needed:
    the unsigned 32-bit high products and the correctly rounded integer-to-float conversion are there."""
    pytest.importorskip("triton", reason="Triton ships with CUDA builds of torch only")
    import triton
    from triton.backends.compiler import GPUTarget

    from proofs.philox_triton import noise_kernel

    signature = {"seeds_ptr": "*i64", "positions_ptr": "*i64", "out_ptr": "*fp32", "vocab": "i32",
                 "BLOCK": "constexpr", "GUMBEL": "constexpr", "LIBDEVICE": "constexpr"}
    for gumbel in (False, True):
        source = triton.compiler.ASTSource(fn=noise_kernel, signature=signature,
                                           constexprs={"BLOCK": 1024, "GUMBEL": gumbel, "LIBDEVICE": True})
        ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
        assert "mul.hi.u32" in ptx and "cvt.rn.f32.u32" in ptx


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine (bench.gpu runs it on one)")
def test_cuda_noise_equals_the_cpu_noise() -> None:
    seeds, positions, tokens = (torch.from_numpy(a) for a in _random_triples(1_000_000, 11))
    rows_seeds, rows_positions = seeds[:256], positions[:256]
    from proofs import philox_triton

    gpu = philox_triton.uniforms(rows_seeds.cuda(), rows_positions.cuda(), 4099).cpu()
    cpu = uniforms_from_words(noise_words(rows_seeds, rows_positions, 4099))
    assert torch.equal(gpu.view(torch.int32), cpu.view(torch.int32))
    torch_gpu = uniforms_from_words(noise_words(rows_seeds.cuda(), rows_positions.cuda(), 4099)).cpu()
    assert torch.equal(torch_gpu.view(torch.int32), cpu.view(torch.int32))
    assert float((gumbel_noise(rows_seeds.cuda(), rows_positions.cuda(), 4099).cpu()
                  - gumbel_noise(rows_seeds, rows_positions, 4099)).abs().max()) <= GUMBEL_TOLERANCE


def test_vllm_processor_samples_the_rule_on_its_rows_only() -> None:
    """sample_rows with a stand-in for vLLM's persistent batch: rows 0 and 2 are ours (different decode
    positions), row 1 belongs to another request and is left alone."""
    gen = torch.Generator().manual_seed(4)
    logits = 3 * torch.randn(3, 257, generator=gen)
    hidden = torch.randn(3, 16, generator=gen)
    ours = {0: _RequestState(key="a", seed=11, temperature=0.8, top_p=0.95),
            2: _RequestState(key="b", seed=2**62 + 1, temperature=0.8, top_p=0.95)}
    ours[2].tokens.extend([5, 6, 7])  # three tokens sampled already: this row is at position 3
    original = logits.clone()
    out = sample_rows(logits, hidden, ours)
    for row, position in ((0, 0), (2, 3)):
        state = ours[row]
        expected = sample_token(original[row], state.seed, position, 0.8, 0.95)
        assert state.tokens[-1] == expected
        assert out[row, expected] == 0 and torch.isinf(out[row]).sum() == 256
        assert float(state.logprobs[-1]) == pytest.approx(
            float(torch.log_softmax(original[row] / 0.8, -1)[expected]), abs=1e-6)
        assert torch.equal(state.hidden[-1], hidden[row].to(torch.bfloat16))
    assert torch.equal(out[1], original[1])


@pytest.mark.parametrize("temperature, top_p", [(0.9, 1.0), (1.0, 0.8), (0.0, 1.0)])
def test_replaying_many_completions_together_gives_each_ones_own_result(temperature, top_p):
    """The validator replays a prefill batch's completions in shared blocks: each result is exactly `replay`'s
    alone, across block boundaries, vocabularies, an empty completion, a token outside the vocabulary, a
    completion longer than a block and tokens that fail."""
    gen = torch.Generator().manual_seed(3)
    cases = []
    for n, vocab in [(6, 29), (3, 29), (0, 29), (9, 31), (4, 29), (2, 29)] + [(5, 29)] * 20:
        logits = torch.randn(n, vocab, generator=gen)
        tokens = [int(t) for t in torch.randint(0, vocab, (n,), generator=gen)]
        cases.append((logits, tokens, int(torch.randint(0, 2**62, (1,), generator=gen))))
    honest = sample_tokens(cases[0][0], torch.tensor([cases[0][2]] * 6), torch.arange(6), temperature, top_p)
    cases[0] = (cases[0][0], [int(t) for t in honest], cases[0][2])  # a completion that replays
    cases[4][1][2] = 29  # outside the vocabulary
    long = torch.randn(REPLAY_BLOCK_ELEMENTS // 29 + 3, 29, generator=gen)  # more rows than one block holds
    cases.append((long, [int(t) for t in long.argmax(-1)], 77))
    together = replay_batch([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases], temperature, top_p,
                            1e-3)
    alone = [replay(logits, tokens, seed, temperature, top_p, 1e-3) for logits, tokens, seed in cases]
    assert together == alone
    assert any(r.failed_positions for r in alone) and any(r.passed and r.n_tokens for r in alone)
