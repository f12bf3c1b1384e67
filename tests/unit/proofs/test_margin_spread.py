"""The margin test under the honest spread (proofs.margins, issue 45): honest prompts' flip rates vary (Gamma shape
0.5 about a population at 2 × the null), and the per-file test (a multiplier per prompt) and the per-worker
e-process still challenge such workers at most at their stated rates, while a worker biased toward the decision
boundary is caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs.honest_spread import honest_file_scores
from proofs.margins import (
    FILE_LAMBDAS,
    MARGIN_LEVELS,
    WORKER_LAMBDAS,
    MarginNull,
    log_e_value,
    margin_test,
    mixture_log_mgf,
)

TAILS = (9.6e-4, 9.0e-4, 7.9e-4, 4.7e-4, 3.2e-5, 3.2e-5)
"""A bf16 pool's calibrated tails (the suite's bf16 profile)."""
NULL = MarginNull(levels=MARGIN_LEVELS, tail=TAILS)
IID = MarginNull(levels=MARGIN_LEVELS, tail=TAILS, spread_shape=None, miscalibration=1.0)
TOKENS = 512


def honest_scores(rng: np.random.Generator, workers: int, files: int, scale: float = 2.0) -> np.ndarray:
    """Rounded margin sums of honest files at the edge of the spread (workers × files): one prompt a file (the worst
    case of the per-prompt spread), its rates the null's × scale × Gamma(0.5) (proofs.honest_spread)."""
    return honest_file_scores(NULL, [TOKENS], workers * files, rng, scale=scale).reshape(workers, files)


def biased_scores(rng: np.random.Generator, workers: int, files: int,
                  prompt_tokens: tuple[int, ...] = (TOKENS,)) -> np.ndarray:
    """A worker adding 1.9ε to some logits, as bench.attacks measured it at bf16: its honest noise (the spread, at
    the null) plus ≈ 2.4 flips per 512 tokens toward the boundary, margins uniform on (0, 3/4), rounded as
    MarginNull.score rounds them (so ~17 % of ~545-token files hold no token above 1/4, as measured)."""
    flips = rng.binomial(TOKENS, 4.6e-3, (workers, files))
    margins = rng.uniform(0.0, 0.75, (workers, files, int(flips.max())))
    rounded = np.array(NULL.points())[np.searchsorted(MARGIN_LEVELS, margins, side="left") - 1]
    honest = honest_file_scores(NULL, prompt_tokens, workers * files, rng, scale=1.0).reshape(workers, files)
    return honest + np.where(
        np.arange(margins.shape[-1]) < flips[..., None], rounded, 0.0).sum(-1)


def worker_log_e_paths(null: MarginNull, scores: np.ndarray, prompt_tokens: tuple[int, ...] = (TOKENS,)) -> np.ndarray:
    """Each worker's log e-value after each file (workers × files) whose prompts hold `prompt_tokens`, its files'
    factors multiplied per λ, as validator.worker_margins does."""
    lams = np.array(WORKER_LAMBDAS)
    sums = np.cumsum(scores[..., None] * lams + null.worker_log_terms(0.0, prompt_tokens), axis=1)
    top = sums.max(-1)
    return top + np.log(np.exp(sums - top[..., None]).mean(-1))


def at_most(rate: float, trials: int) -> float:
    """A count that Binomial(trials, rate) exceeds with probability < 10^-4 (Chernoff: trials · KL ≥ log 10^4)."""
    count = rate * trials
    while count < trials and trials * _kl(count / trials, rate) < math.log(1e4):
        count += 1
    return count


def _kl(p: float, q: float) -> float:
    return sum(a * math.log(a / b) for a, b in ((p, q), (1 - p, 1 - q)) if a > 0)


def test_the_files_moment_generating_function_under_the_spread_is_exact_and_between_its_bounds() -> None:
    """mixture_log_mgf = log E_G[(1 + G·x)^n] (a sample of G agrees), above the i.i.d. n·log(1 + x) (Jensen), below
    the Gamma MGF −k·log(1 − n·x/k) where that is finite; without spread it is the i.i.d. exponent."""
    g = np.random.default_rng(1).gamma(0.5, 2.0, 4_000_000)
    for x, n in ((1e-3, 100), (1e-4, 2000), (3e-5, 512)):
        exact = mixture_log_mgf(math.log(x), n, 0.5)
        assert exact == pytest.approx(math.log(np.mean((1 + g * x) ** n)), rel=0.01)
        assert n * math.log1p(x) < exact <= -0.5 * math.log(1 - n * x / 0.5)
    assert mixture_log_mgf(math.log(1e-3), 100, None) == pytest.approx(100 * math.log1p(1e-3))
    assert math.isfinite(NULL.file_log_mgf(1024.0, 8192))  # finite at every λ: no grid value is invalid
    assert IID.file_log_mgf(2.0, TOKENS) == pytest.approx(TOKENS * IID.log_mgf(2.0))


def test_honest_books_with_the_measured_spread_are_challenged_at_most_at_the_stated_rates() -> None:
    """2,000 honest workers × 300 files of 512 tokens, each file's rates the null's × 2 × Gamma(0.5): the per-worker
    e-process crosses 1/α for at most α of the workers (binomial margins); the i.i.d. e-process of before issue 45
    challenged most of them."""
    scores = honest_scores(np.random.default_rng(45), 2000, 300)
    paths = worker_log_e_paths(NULL, scores)
    for alpha in (1e-2, 1e-3):
        assert (paths.max(1) >= math.log(1 / alpha)).sum() <= at_most(alpha, 2000)
    assert (worker_log_e_paths(IID, scores).max(1) >= math.log(100)).mean() > 0.5


def test_a_worker_biased_toward_the_boundary_is_caught_within_40_files() -> None:
    """Every one of 200 workers with the 1.9ε bias is challenged by the per-worker test at 10^-6 within 40 files of
    512 tokens (median ~11)."""
    scores = biased_scores(np.random.default_rng(19), 200, 40)
    crossed = worker_log_e_paths(NULL, scores) >= math.log(1e6)
    assert crossed.any(1).all()
    assert np.median(crossed.argmax(1) + 1) <= 16
    one = [float(s) for s in scores[0, :3]]
    assert log_e_value([sum(t) for t in zip(*(NULL.worker_log_terms(s, [TOKENS]) for s in one))]) == pytest.approx(
        worker_log_e_paths(NULL, scores[:1, :3])[0, -1])


SIXTEEN_PROMPTS = (32,) * 16
"""A file of 16 prompts × 32 checked tokens: as many tokens as TOKENS, a multiplier per prompt."""


def test_honest_books_of_many_prompt_files_with_a_multiplier_per_prompt_stay_within_the_stated_rates() -> None:
    """2,000 honest workers × 300 files of 16 prompts, each prompt's rates the null's × 2 × its own Gamma(0.5): the
    per-worker e-process with a multiplier per prompt (FACTOR_VERSION 3) crosses 1/α for at most α of the workers."""
    rng = np.random.default_rng(4503)
    scores = honest_file_scores(NULL, SIXTEEN_PROMPTS, 2000 * 300, rng).reshape(2000, 300)
    paths = worker_log_e_paths(NULL, scores, SIXTEEN_PROMPTS)
    for alpha in (1e-2, 1e-3):
        assert (paths.max(1) >= math.log(1 / alpha)).sum() <= at_most(alpha, 2000)


def test_a_multiplier_per_prompt_catches_a_biased_worker_sooner_than_one_a_file() -> None:
    """The 1.9ε-biased worker in files of 16 prompts (its honest noise drawn per prompt, at the null): the factor
    with a multiplier per prompt reaches 10^6 in fewer files than the one-multiplier factor of FACTOR_VERSION 2 —
    which bounds it (Tchen: the comonotone coupling maximises the file's MGF), so every λ's term is at least as large."""
    rng = np.random.default_rng(1903)
    workers, files = 200, 40
    scores = biased_scores(rng, workers, files, SIXTEEN_PROMPTS)
    assert all(a >= b for a, b in zip(NULL.worker_log_terms(3.0, SIXTEEN_PROMPTS), NULL.worker_log_terms(3.0, [TOKENS])))

    def median_files(prompt_tokens: tuple[int, ...]) -> float:
        crossed = worker_log_e_paths(NULL, scores, prompt_tokens) >= math.log(1e6)
        return float(np.median(np.where(crossed.any(1), crossed.argmax(1) + 1, np.inf)))

    per_prompt, one = median_files(SIXTEEN_PROMPTS), median_files((TOKENS,))
    assert per_prompt < one <= 16


def test_a_wider_stated_spread_slows_the_worker_test() -> None:
    """The pool's k and c (docs/protocol.md R6.18) trade detection time for room: the 1.9ε-biased worker (200 workers
    × 200 files of 512 tokens) is caught later as k shrinks or c grows (median 11 files at the defaults, 64 at c = 8,
    47 at k = 0.05), and at c = 16 not within 200 files; less spread (k = 10) catches it sooner."""
    scores = biased_scores(np.random.default_rng(19), 200, 200)

    def median_files(k: float, c: float) -> float:
        crossed = worker_log_e_paths(NULL.model_copy(update={"spread_shape": k, "miscalibration": c}),
                                     scores) >= math.log(1e6)
        return float(np.median(np.where(crossed.any(1), crossed.argmax(1) + 1, np.inf)))

    defaults = median_files(0.5, 2.0)
    assert median_files(10.0, 2.0) < defaults <= 16
    assert defaults < median_files(0.5, 4.0) < median_files(0.5, 8.0) < math.inf
    assert defaults < median_files(0.1, 2.0) < median_files(0.05, 2.0) < math.inf
    assert median_files(0.5, 16.0) == math.inf


FILE = 2_048
"""Checked tokens of the per-file tests' files (decision 0010's figures)."""


def test_honest_files_under_the_spread_are_challenged_at_most_at_the_stated_rate() -> None:
    """200,000 honest files of 2,048 tokens at the edge of the spread (each prompt's rates the null's × 2 × its own
    Gamma(0.5)), of 1 prompt and of 16: the per-file bound with a multiplier per prompt passes its threshold for at
    most α of them at α = 10^-2 and 10^-3 (binomial margins; measured ~3·10^-4 and ~3·10^-5); the i.i.d. bound of
    before passed it for ~4 % of the 1-prompt files at 10^-3."""
    rng = np.random.default_rng(10)
    for prompts in (1, 16):
        groups = [FILE // prompts] * prompts
        scores = honest_file_scores(NULL, groups, 200_000, rng)
        for alpha in (1e-2, 1e-3):
            assert (scores >= NULL.threshold(groups, alpha)).sum() <= at_most(alpha, 200_000)
        if prompts == 1:
            assert (scores >= IID.threshold(groups, 1e-3)).mean() > 1e-2


def test_a_files_threshold_falls_with_its_prompts_to_the_spread_free_one() -> None:
    """At 5·10^-7 (a stated 10^-6 halved), bf16 tails: 2,048 tokens in 1, 4, 16, 64 prompts need S ≥ 14.9, 7.2,
    5.5, 5.1 at c = 1 (decision 0010's prediction, on a coarser λ grid: 15.4, 8.0, 5.7, 5.1) and 26.3, 10.7, 7.2,
    6.4 at c = 2; always above the bound without spread at c (a prompt's multiplier only adds), which is the
    i.i.d. one at c = 1 (4.9)."""
    for c, expected in ((1.0, (14.86, 7.23, 5.51, 5.06)), (2.0, (26.29, 10.73, 7.22, 6.41))):
        null = NULL.model_copy(update={"miscalibration": c})
        thresholds = [null.threshold([FILE // p] * p, 5e-7) for p in (1, 4, 16, 64)]
        assert thresholds == pytest.approx(expected, abs=0.01)
        assert all(a > b for a, b in zip(thresholds, thresholds[1:]))
        assert thresholds[-1] > null.model_copy(update={"spread_shape": None}).threshold([FILE], 5e-7)
    assert IID.threshold([FILE], 5e-7) == pytest.approx(4.94, abs=0.01)
    assert IID.threshold([FILE], 5e-7) == IID.threshold([32] * 64, 5e-7)  # without spread the grouping is moot


def test_one_prompts_bound_is_the_one_multiplier_bound_and_the_threshold_its_inverse() -> None:
    """A file of one prompt (or one completion) is bounded by one G: min over the λ grid of L_n(λ) − λs, the
    per-worker factor's exponent; the threshold is the least score whose bound reaches the rate."""
    for score in (1.0, 5.0, 20.0):
        one_g = min(NULL.file_log_mgf(lam, FILE) - lam * score for lam in FILE_LAMBDAS)
        assert NULL.log_p_value(score, [FILE]) == pytest.approx(min(0.0, one_g))
        assert NULL.log_p_value(score, [FILE // 2, FILE // 2]) < NULL.log_p_value(score, [FILE])
    for groups in ([FILE], [512] * 4, [1_000, 1_000, 48]):
        threshold = NULL.threshold(groups, 1e-6)
        assert NULL.log_p_value(threshold, groups) == pytest.approx(math.log(1e-6))
        assert NULL.log_p_value(threshold * 0.99, groups) > math.log(1e-6)
    assert NULL.threshold([1], 1e-6) == math.inf  # one token, at most 1, cannot reach it
    assert NULL.log_p_value(3.0, []) == 0.0 and NULL.threshold([], 1e-6) == math.inf


def test_the_file_test_groups_a_files_completions_by_prompt() -> None:
    """margin_test sums each prompt's checked tokens (equal keys: one prompt, whatever their order), so the same
    completions judged as 64 prompts meet a lower threshold than as one; a completion is bounded as its own prompt's
    tokens either way."""
    completions = [(32, 0.0)] * 63 + [(32, 4.0)]
    one = margin_test(completions, ["p"] * 64, NULL, 1e-6)
    many = margin_test(completions, list(range(64)), NULL, 1e-6)
    pairs = margin_test(completions, [i % 32 for i in range(64)], NULL, 1e-6)
    assert one.prompt_tokens == [FILE] and many.prompt_tokens == [32] * 64 and pairs.prompt_tokens == [64] * 32
    assert many.threshold < pairs.threshold < one.threshold and many.log_p_value < one.log_p_value
    assert one.worst_completion == many.worst_completion == 63
    assert one.worst_completion_log_p_value == many.worst_completion_log_p_value
    with pytest.raises(ValueError, match="one prompt per completion"):
        margin_test(completions, ["p"], NULL, 1e-6)
