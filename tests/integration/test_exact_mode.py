"""Exact mode (docs/protocol.md, "Exact mode"): the torch path and the numpy reference written from the spec
compute the same integers; batch size, the KV cache and thread counts change no bit; the stated bounds raise;
a changed weight is caught at the first token it changes."""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from inference import exact
from inference.tiny import BOS_ID, EOS_ID, build_tiny_llama
from proofs.sampling import noise_words
from tests.support import exact_reference as reference

VOCAB = 100


def _qwen2(seed: int) -> Qwen2ForCausalLM:
    """A Qwen2-style model: q/k/v biases, grouped-query attention, tied embeddings."""
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                         rms_norm_eps=1e-6, eos_token_id=EOS_ID)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                projection.bias.normal_(std=0.05)
    return model


MODELS = {
    "tiny-llama": lambda: build_tiny_llama(VOCAB, 3, lm_head_std=0.25),
    "qwen2-style": lambda: _qwen2(5),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def models(request: pytest.FixtureRequest) -> tuple[torch.nn.Module, exact.ExactPolicy]:
    model = MODELS[request.param]()
    return model, exact.quantise_policy(model)


@pytest.fixture(scope="module")
def tiny() -> exact.ExactPolicy:
    return exact.quantise_policy(MODELS["tiny-llama"]())


def _prefill(policy: exact.ExactPolicy, prompt: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Q16 final hidden states and logits of every position of one prompt."""
    hidden = policy.forward(torch.tensor([prompt]), torch.arange(len(prompt))[None],
                            torch.ones(1, len(prompt), dtype=torch.int64), exact.KVCache())[0]
    return hidden, policy.logits(hidden)


def _prompts(count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[BOS_ID] + [rng.randrange(4, VOCAB) for _ in range(rng.randrange(1, 9))] for _ in range(count)]


def test_the_reference_written_from_the_spec_computes_the_same_integers(models) -> None:
    model, policy = models
    state = {name: value.detach().numpy() for name, value in model.state_dict().items()}
    checkpoint = reference.quantise(state, model.config.to_dict())
    assert reference.digest(checkpoint) == policy.digest()
    prompt = [BOS_ID, 10, 11, 12, 13, 14, 15]
    hidden, logits = _prefill(policy, prompt)
    reference_hidden, reference_logits = reference.forward(checkpoint, prompt)
    assert np.array_equal(hidden.numpy(), reference_hidden)
    assert np.array_equal(logits.numpy(), reference_logits)
    for temperature in (1.0, 0.7, 0.0):
        completion = exact.generate(policy, [prompt[:3]], [11], temperature, 12, [EOS_ID])[0]
        tokens, reference_rows = reference.generate(checkpoint, prompt[:3], 11, temperature, 12, {EOS_ID})
        assert completion.token_ids == tokens
        assert np.array_equal(completion.logits.numpy(), reference_rows)


def test_integer_logits_stay_near_the_float_models(models) -> None:
    model, policy = models
    prompt = [BOS_ID, 20, 21, 22, 23]
    with torch.no_grad():
        float_logits = model(torch.tensor([prompt])).logits[0].double()
    _, logits = _prefill(policy, prompt)
    error = (logits.double() / 2**exact.FRAC - float_logits).abs().max()
    assert error < 0.05 * float_logits.abs().max()


def test_fixed_point_noise_is_the_references_and_a_gumbel_to_1e5() -> None:
    words = [0, 1, 2**12, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1] + random.Random(0).sample(range(2**32), 2000)
    noise = exact.fixed_gumbel(torch.tensor(words, dtype=torch.int64)).tolist()
    assert noise == [reference.gumbel_q16(w) for w in words]
    uniforms = [(2 * w + 1) / 2**33 for w in words]
    exact_gumbel = [-math.log(-math.log1p(-u)) for u in uniforms]
    assert max(abs(g / 2**16 - e) for g, e in zip(noise, exact_gumbel)) < 1e-5
    assert max(noise) <= exact.NOISE_MAX


def test_drawing_computes_the_noise_only_where_it_can_win_and_draws_what_the_full_rule_draws() -> None:
    generator = torch.Generator().manual_seed(8)
    logits = torch.randint(-2**20, 2**20, (12, 2000), generator=generator)
    logits[:4] = 7  # all tied before the noise
    logits[4:8, 123] = 2**30  # one token far ahead
    seeds = torch.arange(12) * 1_000_003
    for temperature in (1.0, 0.3):
        z = exact.rdiv(logits * 2**16, round(temperature * 2**16))
        full = (z + exact.fixed_gumbel(noise_words(seeds, torch.full_like(seeds, 9), 2000))).argmax(dim=-1)
        assert torch.equal(exact.sample_fixed(logits, seeds, 9, temperature), full)


def test_ties_go_to_the_lowest_token_id_among_the_bar_tokens_and_the_rest() -> None:
    """Scores made equal on purpose: the draw is the lowest id among the best, wherever the tied tokens are."""
    generator = torch.Generator().manual_seed(11)
    logits = torch.randint(-2**18, 2**18, (6, 3000), generator=generator)
    seeds = torch.arange(6) * 7919
    noise = exact.fixed_gumbel(noise_words(seeds, torch.full_like(seeds, 4), 3000))
    best = (logits + noise).amax(dim=-1)
    ties = ([5, 2999], [17, 18, 2000], [0, 1], [2500, 7], list(range(2900, 3000)) + [1000], list(range(40, 140, 2)))
    for row, tied in enumerate(ties):  # more tied tokens than BAR_TOKENS: some of them are past the bar
        for token in tied:
            logits[row, token] = best[row] + 1000 - noise[row, token]  # every tied token scores best + 1000
    expected = [min(tied) for tied in ties]
    assert exact.sample_fixed(logits, seeds, 4, 1.0).tolist() == expected
    assert ((logits + noise).argmax(dim=-1)).tolist() == expected


def test_the_float_noise_estimate_stays_within_a_unit_of_the_integer_noise() -> None:
    """The sampler's shortcut rests on |fixed_gumbel − gumbel_estimate| < NOISE_SLACK (64 Q16 units) for every word:
    at the edges of u's two branches and of the word range, and on random words, it is below one unit."""
    edges = [*range(0, 4096), *range(2**31 - 4096, 2**31 + 4096), *range(2**32 - 4096, 2**32)]
    words = torch.tensor(edges + random.Random(3).sample(range(2**32), 50_000), dtype=torch.int64)
    gap = (exact.fixed_gumbel(words).double() - exact.gumbel_estimate(words)).abs().max()
    assert gap < 1 < exact.NOISE_SLACK


def test_near_ties_are_drawn_from_the_integer_noise_and_clear_leads_from_the_estimate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tokens 1 Q16 unit apart (either order) and exactly tied sit inside the estimate's slack: those rows are
    drawn by the integer rule (the full rule's token); a row with a clear leader never computes integer noise."""
    generator = torch.Generator().manual_seed(13)
    logits = torch.randint(-2**18, 2**18, (8, 500), generator=generator)
    seeds = torch.arange(8) * 104729
    noise = exact.fixed_gumbel(noise_words(seeds, torch.full_like(seeds, 6), 500))
    best = (logits + noise).amax(dim=-1)
    near = {0: (10, 400, 1), 1: (400, 10, 1), 2: (77, 78, 0), 3: (3, 499, -1), 4: (250, 40, 30)}
    for row, (first, second, gap) in near.items():  # scores best + 500 and best + 500 − gap
        logits[row, first] = best[row] + 500 - noise[row, first]
        logits[row, second] = best[row] + 500 - gap - noise[row, second]
    full = (logits + noise).argmax(dim=-1)
    drawn_exactly: list[int] = []
    integer_rule = exact._draw_exact

    def counted(z: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        drawn_exactly.append(z.shape[0])
        return integer_rule(z, *rest)

    monkeypatch.setattr(exact, "_draw_exact", counted)
    assert torch.equal(exact.sample_fixed(logits, seeds, 6, 1.0), full)
    assert full[:5].tolist() == [10, 400, 77, 499, 250]
    assert drawn_exactly == [5]  # rows 0–4 only: rows 5–7 lead by far more than the slack
    drawn_exactly.clear()
    assert torch.equal(exact.sample_fixed(logits[5:], seeds[5:], 6, 1.0), full[5:]) and drawn_exactly == []


def test_integer_sqrt_exp_and_silu_are_exact_integers_near_the_reals() -> None:
    rng = random.Random(1)
    values = [0, 1, 2, 3, 4, 2**62 - 1] + [rng.randrange(2**62) for _ in range(1000)] + [k * k - 1 for k in range(1, 200)]
    assert exact.isqrt(torch.tensor(values)).tolist() == [math.isqrt(v) for v in values]
    below = [k * k + delta for k in [*range(1, 3000, 7), *range(2**26 - 3000, 2**26)] for delta in (-1, 0, 1)]
    below = [v for v in below if v < 2**52] + [2**52 - 1]  # the float root alone, exact below 2^52 (R5.6)
    assert exact.isqrt(torch.tensor(below)).tolist() == [math.isqrt(v) for v in below]
    d = torch.arange(-30 * 2**16, 1, 997)
    assert (exact.iexp(d).double() / 2**30 - torch.exp(d.double() / 2**16)).abs().max() < 1e-5
    assert np.array_equal(exact.iexp(d).numpy(), reference.exp_q30(d.numpy()))
    every_fraction = torch.arange(-(1 << 22), 1, 61)  # y = rdiv(d · log2e, 2^30) meets every t in [0, 2^16)
    assert np.array_equal(exact.iexp(every_fraction).numpy(), reference.exp_q30(every_fraction.numpy()))
    x = torch.arange(-30 * 2**16, 30 * 2**16, 997)
    assert (exact.silu(x).double() / 2**16 - torch.nn.functional.silu(x.double() / 2**16)).abs().max() < 1e-4
    assert np.array_equal(exact.silu(x).numpy(), reference.silu_q16(x.numpy()))


def test_silu_looked_up_is_silu_computed_at_every_table_entry_and_past_it() -> None:
    """The CPU's SiLU table (±2^19) holds R5.6's integers for every entry; values past it, mixed in, are computed."""
    rng = torch.Generator().manual_seed(14)
    x = torch.cat([torch.arange(-(1 << exact.SILU_TABLE_BITS) - 9, (1 << exact.SILU_TABLE_BITS) + 9),
                   torch.randint(-(1 << 31) + 1, 1 << 31, (5000,), generator=rng)])
    x = x[torch.randperm(x.numel(), generator=rng)]
    assert torch.equal(exact.silu(x), exact._computed_silu(x))
    assert torch.equal(exact.silu(x[:4096].view(64, 64)[:, ::2]), exact._computed_silu(x[:4096].view(64, 64)[:, ::2]))


def test_each_row_is_the_same_integers_in_any_batch(tiny: exact.ExactPolicy) -> None:
    prompts = _prompts(64, seed=2)
    seeds = list(range(100, 164))
    full = exact.generate(tiny, prompts, seeds, 1.0, 10, [EOS_ID])
    for begin, size in ((0, 1), (5, 3), (47, 17)):
        part = exact.generate(tiny, prompts[begin:begin + size], seeds[begin:begin + size], 1.0, 10, [EOS_ID])
        for row, completion in enumerate(part):
            assert completion.token_ids == full[begin + row].token_ids
            assert torch.equal(completion.logits, full[begin + row].logits)
            assert torch.equal(completion.hidden, full[begin + row].hidden)


def test_decoding_with_the_kv_cache_equals_one_full_prefill(models) -> None:
    _, policy = models
    prompts = _prompts(4, seed=3)
    for prompt, completion in zip(prompts, exact.generate(policy, prompts, [1, 2, 3, 4], 1.0, 16, [EOS_ID])):
        assert torch.equal(exact.prefill_logits(policy, prompt, completion.token_ids), completion.logits)
        assert exact.first_deviation(policy, prompt, completion.token_ids, prompts.index(prompt) + 1, 1.0) is None


def test_a_batched_prefill_computes_each_pair_s_own_integers(models, monkeypatch: pytest.MonkeyPatch) -> None:
    _, policy = models
    prompts = _prompts(7, seed=12)
    completions = [[(5 * row + k) % VOCAB for k in range(1 + 3 * row)] for row in range(7)]
    pairs = list(zip(prompts, completions))
    monkeypatch.setattr(exact, "PREFILL_TOKENS", 40)  # several passes of a few rows each
    for logits, (prompt, completion) in zip(exact.prefill_logits_batch(policy, pairs), pairs, strict=True):
        assert torch.equal(logits, exact.prefill_logits(policy, prompt, completion))


def test_thread_counts_change_no_bit(tiny: exact.ExactPolicy) -> None:
    prompts = _prompts(8, seed=4)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2):
            torch.set_num_threads(count)
            results.append(exact.generate(tiny, prompts, list(range(8)), 1.0, 12, [EOS_ID]))
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*results):
        assert one.token_ids == two.token_ids and torch.equal(one.logits, two.logits)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the CUDA path runs where one is lent")
def test_cuda_computes_the_cpus_integers(tiny: exact.ExactPolicy) -> None:
    prompts = _prompts(24, seed=5)
    on_cpu = exact.generate(tiny, prompts, list(range(24)), 1.0, 12, [EOS_ID])
    on_cuda = exact.generate(tiny.to("cuda"), prompts, list(range(24)), 1.0, 12, [EOS_ID])
    for cpu, cuda in zip(on_cpu, on_cuda):
        assert cpu.token_ids == cuda.token_ids and torch.equal(cpu.logits, cuda.logits)


def test_every_stated_bound_raises_before_it_is_broken(tiny: exact.ExactPolicy) -> None:
    with pytest.raises(exact.ExactOverflowError, match="weight"):
        exact.quantise_matrix(torch.full((2, 4), 40.0))
    with pytest.raises(exact.ExactOverflowError, match="quantised activation"):
        exact.quantise_rows(torch.tensor([[2**31, 0]]))
    with pytest.raises(exact.ExactOverflowError, match="inner dimension"):
        exact.quantise_matrix(torch.ones(1, exact.MAX_INNER + 1))(torch.ones(1, exact.MAX_INNER + 1, dtype=torch.int64))
    with pytest.raises(exact.ExactOverflowError, match="RMSNorm input"):
        exact.rms_norm(torch.tensor([[exact.MAX_RESIDUAL, 0]]), torch.ones(2, dtype=torch.int64), 1)
    with pytest.raises(exact.ExactOverflowError, match="SiLU"):
        exact.silu(torch.tensor([-exact.MAX_QUANTISED]))
    with pytest.raises(exact.ExactOverflowError, match="positions"):
        tiny.forward(torch.tensor([[BOS_ID]]), torch.tensor([[2**32]]), torch.ones(1, 1, dtype=torch.int64),
                     exact.KVCache())
    blown_up = replace(tiny, embed=tiny.embed * 20000)
    with pytest.raises(exact.ExactOverflowError, match="residual|RMSNorm"):
        blown_up.forward(torch.tensor([[BOS_ID, 10]]), torch.arange(2)[None], torch.ones(1, 2, dtype=torch.int64),
                         exact.KVCache())


def _with_weight(policy: exact.ExactPolicy, layer: int, name: str, row: int, column: int) -> exact.ExactPolicy:
    matrix = getattr(policy.layers[layer], name)
    weight = matrix.weight.clone()
    weight[row, column] = weight[row, column] + (64 if weight[row, column] < 0 else -64)
    changed = replace(policy.layers[layer], **{name: replace(matrix, weight=weight)})
    return replace(policy, layers=policy.layers[:layer] + (changed,) + policy.layers[layer + 1:])


def test_a_weight_moved_by_half_its_int8_range_changes_the_logits(tiny: exact.ExactPolicy) -> None:
    """(A change that the rounding downstream absorbs leaves every logit, so every drawn token, as it was.)"""
    prompt = [BOS_ID, 30, 31, 32, 33, 34, 35, 36]
    _, honest = _prefill(tiny, prompt)
    rng = random.Random(6)
    for layer in range(len(tiny.layers)):
        for name in ("q", "k", "v", "o", "gate", "up", "down"):
            rows, columns = getattr(tiny.layers[layer], name).weight.shape
            changed = _with_weight(tiny, layer, name, rng.randrange(rows), rng.randrange(columns))
            assert changed.digest() != tiny.digest()
            _, logits = _prefill(changed, prompt)
            assert not torch.equal(logits, honest), f"layer {layer} {name}"


def test_a_policy_one_percent_off_in_one_layer_is_caught_at_its_first_differing_token() -> None:
    model = MODELS["tiny-llama"]()
    honest = exact.quantise_policy(model)
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    cheat = exact.quantise_policy(model)
    prompts = _prompts(8, seed=7)
    caught = 0
    for row, (prompt, completion) in enumerate(zip(prompts, exact.generate(cheat, prompts, range(8), 1.0, 24,
                                                                           [EOS_ID]))):
        truth = exact.generate(honest, [prompt], [row], 1.0, 24, [EOS_ID])[0].token_ids
        first_difference = next((i for i, (a, b) in enumerate(zip(completion.token_ids, truth)) if a != b), None)
        assert exact.first_deviation(honest, prompt, completion.token_ids, row, 1.0) == first_difference
        caught += first_difference is not None
    assert caught >= 1


def test_rope_tables_are_the_published_ones() -> None:
    tables = torch.stack([exact.COS_TABLE, exact.SIN_TABLE]).numpy().astype("<i8").tobytes()
    assert hashlib.sha256(tables).hexdigest() == "b929542bbc3e36f075bf19c9157e20362ac28013c1a04679bf54a491a28dba5f"
    assert [reference.cos_sin(turns) for turns in (0, 2**30, 2**31, 3 * 2**30)] == [
        (2**30, 0), (0, 2**30), (-(2**30), 0), (0, -(2**30))]


def _gemm_at_its_largest(inner: int, shift: int, x_peaks: tuple[int, ...]) -> exact.IntMatrix:
    """A matrix of ±127 weights (multiplier 2^14, shift `shift`) applied to rows of magnitude `x_peaks` whose signs
    follow the weights' (|acc| = 127² · inner): its output must be R5.6's integers, computed in int64 here."""
    signs = torch.randint(0, 2, (4, inner), generator=torch.Generator().manual_seed(9)) * 2 - 1
    weight = (127 * signs).to(torch.int8)
    x = torch.stack([peak * signs[row % 4] * (-1) ** row for row, peak in enumerate(x_peaks)])
    matrix = exact.IntMatrix(weight, torch.full((4,), 1 << 14), torch.full((4,), shift),
                             torch.zeros(4, dtype=torch.int64))
    q, a, e = exact.quantise_rows(x)
    sums = q.long() @ weight.long().t()
    assert int(sums.abs().max()) == 127 * 127 * inner
    assert torch.equal(matrix(x), exact.rdiv(sums * a * matrix.multiplier, 127 << (matrix.shift - e)))
    return matrix


def test_the_cpu_gemm_is_exact_at_the_largest_sums_the_bounds_allow() -> None:
    """R5.6's bound on the inner dimension (a float64 GEMM, the rescale in int64), and the largest matrix its
    float32 GEMM and float64 rescale take: 127 · Σ|W[r]| · 2^29 + 64 · 2^S ≤ 2^52 with a = 2^15 (e = 15) and a
    row with e = 0 (the largest S − e)."""
    widest = _gemm_at_its_largest(exact.MAX_INNER, 40, (1000, 1000, 1000))
    assert widest.cpu_operands[0].dtype == torch.float64 and widest.cpu_operands[1] is None
    inner = (exact.FLOAT_RESCALE_LIMIT >> 29) // 127 // 127                       # 520
    largest = _gemm_at_its_largest(inner, 33, ((1 << 30) - 1, (1 << 30) - 1, (1 << 15) - 1, 3))
    assert 127 * 127 * inner * (1 << 29) + (64 << 33) <= exact.FLOAT_RESCALE_LIMIT
    assert largest.cpu_operands[0].dtype == torch.float32 and largest.cpu_operands[1] is not None
    too_large = _gemm_at_its_largest(inner, 34, ((1 << 30) - 1, 5))
    assert too_large.cpu_operands[1] is None


def test_a_matrix_past_the_static_rescale_bound_rescales_in_float64_where_the_call_s_own_values_allow() -> None:
    """R5.6: max|acc| · max a · max M + max 64 · 2^S ≤ 2^52 measured on the call. The widest matrix (inner 2^16, its
    static bound broken) at |acc| = 127² · 2^16 takes the float64 rescale up to a = 260 (16129 · 260 · 2^30 + 2^22
    ≤ 2^52) and int64 from a = 261; both give R5.6's integers."""
    for peak, fits in ((260, True), (261, False)):
        matrix = _gemm_at_its_largest(exact.MAX_INNER, 16, (peak, peak, peak // 2))
        assert matrix.cpu_operands[1] is None
        q, a, _ = exact.quantise_rows(torch.full((1, exact.MAX_INNER), peak))
        acc = torch.full((1, 4), float(127 * 127 * exact.MAX_INNER))
        assert int(a.max()) == peak and matrix._rescale_fits(acc, a) is fits


def test_float64_quotients_are_exact_within_the_stated_bound() -> None:
    """⌊n / d⌋ by one float64 division and floor (R5.6) wherever |n| + d < 2^53, at the quotients nearest an integer."""
    rng = random.Random(10)
    pairs = []
    for _ in range(3000):
        d = rng.choice([1, 2, 3, 127, 2**31 - 1, 2**31, rng.randrange(1, 2**40)])
        k = rng.randrange(((1 << 53) - 1 - d) // d)
        n = k * d + rng.choice([-1, 0, 1, d - 1, d // 2])
        if abs(n) + d < 1 << 53:
            pairs.append((n * rng.choice([1, -1]), d))
    numerators = torch.tensor([n for n, _ in pairs], dtype=torch.float64)
    divisors = torch.tensor([d for _, d in pairs], dtype=torch.float64)
    quotients = exact.floor_divide_exact(numerators, divisors).long().tolist()
    assert quotients == [n // d for n, d in pairs]
