"""The margin test's power against the 1.9ε logit bias (proofs.margin_power, docs/protocol.md R8.6): the model
reproduces what bench.file_size measured on the pool it was fitted on (under the i.i.d. per-file bound it ran then),
and from the pool's own null, under the honest spread with a multiplier per prompt, it gives the checked tokens a
file that 99 % of biased files need at bench.attacks' bf16 profile: ~4,650 at 256 tokens a prompt (~2,750 i.i.d.)."""

from __future__ import annotations

import pytest

from proofs.margin_power import STEERING_BIAS_EPS, bias_power, flip_points, packed_prompts, tokens_for_power
from proofs import margins
from proofs.margins import MarginNull
from protocol.runspec import DEFAULT_MARGIN_TAIL, DEFAULT_MARGIN_TOKENS

BF16_EPS = 0.0203
"""bench.attacks' bf16 profile: its logit tolerance and, below, its tails (docs/notes/attacks.md)."""
BF16 = MarginNull(tail=(1.60e-3, 1.52e-3, 1.28e-3, 5.50e-4, 1.75e-5, 1.75e-5), tokens=536_320)
"""The null of the noisiest population (since 932154e)."""
POOLED = MarginNull(tail=(7.97e-4, 7.55e-4, 6.38e-4, 2.73e-4, 8.11e-6, 8.11e-6), tokens=1_072_768,
                    spread_shape=None, miscalibration=1.0)
"""The null bench.file_size measured on (b10d9ca), with the per-file bound of then: tokens i.i.d. from it."""
FP32 = MarginNull(tail=DEFAULT_MARGIN_TAIL, tokens=DEFAULT_MARGIN_TOKENS)
RATE = 1e-6
PROMPT = 256
"""Checked tokens a prompt holds at most in bench.attacks' files: 16 completions × 16 tokens."""



def test_a_flip_adds_its_margin_rounded_to_the_nulls_points():
    """A flip's margin is uniform on (0, 0.95]; where no honest margin passed 1/4 (equal tails above it) the whole
    (1/4, 0.95] counts 1, as MarginNull.score rounds it."""
    points = flip_points(BF16)
    assert sum(p for _, p in points) == pytest.approx(1.0)
    top = STEERING_BIAS_EPS / 2
    assert sum(p for x, p in points if x == 1.0) == pytest.approx((top - 1 / 4) / top)
    assert sum(p for x, p in points if x == 1 / 4) == pytest.approx((1 / 4 - 1 / 16) / top)


@pytest.mark.parametrize(("tokens", "low", "high"), [(545, 0.053, 0.297), (1_090, 0.392, 0.726),
                                                     (2_185, 0.931, 0.977), (4_384, 0.987, 1.0)])
def test_the_model_reproduces_bench_file_size_on_its_pool(tokens, low, high, monkeypatch):
    """bench.file_size at b10d9ca (docs/notes/attacks.md): the 1.9ε bias at the bf16 profile was challenged in
    4/30, 17/30, 288/300 and 300/300 files of ~545 to ~4,384 checked tokens (Wilson 95 % intervals given here). The
    model's power on that null is inside each interval, or within 0.01 above it: 0.07, 0.10 and 0.02 above the
    measured rates at 545, 1,090 and 2,185 tokens (its flips are Poisson; the measured ones were more spread: 17 %
    of 545-token files held no flip above 1/4 of the bound where a Poisson count has 10 %). The test as it ran then:
    tokens i.i.d. from the null, its bound minimised over λ = 2^-2 … 2^10."""
    monkeypatch.setattr(margins, "FILE_LAMBDAS", tuple(2.0**k for k in range(-2, 11)))
    assert low <= bias_power(POOLED, [tokens], RATE, BF16_EPS, 1.0) <= high + 0.01


def test_ninety_nine_percent_of_biased_files_need_about_4650_checked_tokens_at_bf16():
    """Under the spread (k = 0.5, c = 2), 256 tokens a prompt: ~4,650 (the i.i.d. bound's ~2,750); the fewer tokens a
    prompt holds, the fewer a file needs (~3,500 at 32)."""
    needed = tokens_for_power(BF16, 0.99, PROMPT, RATE, BF16_EPS, 1.0, 100_000)
    assert needed is not None and 4_500 <= needed <= 4_800
    power = [bias_power(BF16, packed_prompts(n, PROMPT), RATE, BF16_EPS, 1.0) for n in (needed - 50, needed)]
    assert power[1] >= 0.99 > power[0]
    iid = BF16.model_copy(update={"spread_shape": None, "miscalibration": 1.0})
    assert 2_600 <= tokens_for_power(iid, 0.99, PROMPT, RATE, BF16_EPS, 1.0, 100_000) <= 2_900
    assert 3_400 <= tokens_for_power(BF16, 0.99, 32, RATE, BF16_EPS, 1.0, 100_000) < needed


def test_one_prompts_tokens_alone_never_reach_the_power():
    """A file of one prompt pays the whole spread: at 2,048 to 8,192 tokens its power against the bias is < 2 %."""
    assert all(bias_power(BF16, [n], RATE, BF16_EPS, 1.0) < 0.02 for n in (2_048, 8_192))
    assert tokens_for_power(BF16, 0.99, 8_192, RATE, BF16_EPS, 1.0, 8_192) is None


def test_power_grows_with_the_checked_tokens_and_is_nil_without_any():
    """Up to the files whose threshold the recursion reaches and past them (Chernoff's bound: 10^9 tokens)."""
    powers = [bias_power(BF16, packed_prompts(n, PROMPT), RATE, BF16_EPS, 1.0)
              for n in (0, 500, 1_000, 2_000, 4_000, 8_000, 10**9)]
    assert powers[0] == 0.0 and powers == sorted(powers) and powers[-2] > 0.9999 and powers[-1] == 1.0
    assert bias_power(FP32, packed_prompts(10**9, PROMPT), RATE, 1e-3, 1.0) == 1.0


def test_at_the_fp32_tolerance_the_bias_flips_too_little_for_any_shipped_file_size():
    """1.9ε at ε = 10^-3 is a 0.0019 logit bias: bench.file_size challenged 0/30 files at every size up to ~4,400
    tokens; the model agrees, and puts 99 % beyond a file of 64 × 1,024 tokens."""
    assert bias_power(FP32, packed_prompts(4_384, PROMPT), RATE, 1e-3, 1.0) < 0.05
    assert tokens_for_power(FP32, 0.99, PROMPT, RATE, 1e-3, 1.0, 65_536) is None


def test_a_colder_temperature_and_a_looser_tolerance_flip_more():
    file = packed_prompts(2_500, PROMPT)
    base = bias_power(BF16, file, RATE, BF16_EPS, 1.0)
    assert bias_power(BF16, file, RATE, BF16_EPS, 0.5) > base
    assert bias_power(BF16, file, RATE, 2 * BF16_EPS, 1.0) > base
