"""The margin test's power against the 1.9ε logit bias (proofs.margin_power, docs/protocol.md R8.6): the model
reproduces what bench.file_size measured on the pool it was fitted on, and from the pool's own null it gives the
~2,750 checked tokens a file that 99 % of biased files need at bench.attacks' bf16 profile."""

from __future__ import annotations

import pytest

from proofs.margin_power import STEERING_BIAS_EPS, bias_power, flip_points, tokens_for_power
from proofs.margins import MarginNull
from protocol.runspec import DEFAULT_MARGIN_TAIL, DEFAULT_MARGIN_TOKENS

BF16_EPS = 0.0203
"""bench.attacks' bf16 profile: its logit tolerance and, below, its tails (docs/notes/attacks.md)."""
BF16 = MarginNull(tail=(1.60e-3, 1.52e-3, 1.28e-3, 5.50e-4, 1.75e-5, 1.75e-5), tokens=536_320)
"""The null of the noisiest population (since 932154e)."""
POOLED = MarginNull(tail=(7.97e-4, 7.55e-4, 6.38e-4, 2.73e-4, 8.11e-6, 8.11e-6), tokens=1_072_768)
"""The null bench.file_size measured on (b10d9ca)."""
FP32 = MarginNull(tail=DEFAULT_MARGIN_TAIL, tokens=DEFAULT_MARGIN_TOKENS)
RATE = 1e-6



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
def test_the_model_reproduces_bench_file_size_on_its_pool(tokens, low, high):
    """bench.file_size at b10d9ca (docs/notes/attacks.md): the 1.9ε bias at the bf16 profile was challenged in
    4/30, 17/30, 288/300 and 300/300 files of ~545 to ~4,384 checked tokens (Wilson 95 % intervals given here). The
    model's power on that null is inside each interval, or within 0.01 above it: 0.07, 0.10 and 0.02 above the
    measured rates at 545, 1,090 and 2,185 tokens (its flips are Poisson; the measured ones were more spread: 17 %
    of 545-token files held no flip above 1/4 of the bound where a Poisson count has 10 %)."""
    assert low <= bias_power(POOLED, tokens, RATE, BF16_EPS, 1.0) <= high + 0.01


def test_ninety_nine_percent_of_biased_files_need_about_2750_checked_tokens_at_bf16():
    needed = tokens_for_power(BF16, 0.99, RATE, BF16_EPS, 1.0, 100_000)
    assert needed is not None and 2_600 <= needed <= 2_900
    assert bias_power(BF16, needed, RATE, BF16_EPS, 1.0) >= 0.99 > bias_power(BF16, needed - 50, RATE, BF16_EPS, 1.0)


def test_power_grows_with_the_checked_tokens_and_is_nil_without_any():
    """Up to the files whose threshold the recursion reaches and past them (Chernoff's bound: 10^9 tokens)."""
    powers = [bias_power(BF16, n, RATE, BF16_EPS, 1.0) for n in (0, 500, 1_000, 2_000, 4_000, 8_000, 10**9)]
    assert powers[0] == 0.0 and powers == sorted(powers) and powers[-2] > 0.9999 and powers[-1] == 1.0
    assert bias_power(FP32, 10**9, RATE, 1e-3, 1.0) == 1.0


def test_at_the_fp32_tolerance_the_bias_flips_too_little_for_any_shipped_file_size():
    """1.9ε at ε = 10^-3 is a 0.0019 logit bias: bench.file_size challenged 0/30 files at every size up to ~4,400
    tokens; the model agrees, and puts 99 % beyond a file of 64 × 1,024 tokens."""
    assert bias_power(FP32, 4_384, RATE, 1e-3, 1.0) < 0.05
    assert tokens_for_power(FP32, 0.99, RATE, 1e-3, 1.0, 65_536) is None


def test_a_colder_temperature_and_a_looser_tolerance_flip_more():
    base = bias_power(BF16, 1_500, RATE, BF16_EPS, 1.0)
    assert bias_power(BF16, 1_500, RATE, BF16_EPS, 0.5) > base
    assert bias_power(BF16, 1_500, RATE, 2 * BF16_EPS, 1.0) > base
