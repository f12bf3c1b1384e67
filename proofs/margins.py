"""The statistical test of the sampler: per-token margins, a calibrated null, and bounds on its tails.

The replay (proofs.sampling) bounds every token on its own: a token passes when its score under the
validator's logits is within 2ε/T of the best. At a bf16-calibrated ε that bound leaves room: a worker that
knows the validator's logits and the public noise can flip near-ties, bias logits by less than 2ε or sample a
little colder, and every token still passes. What such a worker cannot hide is the *distribution* of its
margins. An honest worker emits its own argmax, so under the validator's logits its token is the argmax
except where logit noise reorders a near-tie, and then only by a noise-sized gap (Token-DiFR's observation).

Per token (proofs.sampling.replay computes it where the logits live):

    margin m = min(1, gap / (2ε/T + 2·GUMBEL_TOLERANCE))      gap = best core score − the token's score
    m = 1 also when the token lies outside the validator's own top-p nucleus (top_p < 1)

so m ∈ [0, 1], 0 for the validator's argmax and 1 at the hard bound. A completion's or a file's statistic is
the sum S of its margins over n tokens, each rounded up to a point of the null's support (`MarginNull.points`,
`MarginNull.score`).

The null (`MarginNull`): `validator calibrate` counts, over M honest tokens, how many margins exceed each
level θ_0 = 0 < θ_1 < … < θ_K, and keeps an upper confidence bound q_k ≥ P(m > θ_k) per level (`tail_bound`:
the Chernoff bound of the binomial, at confidence 1 − β / (K + 1)). The distribution that puts mass q_k − q_{k+1}
at θ_{k+1} (and q_K at 1) dominates every distribution with those tails, so its moment generating function
bounds the honest one, and for n independent tokens

    P(S ≥ s) ≤ exp(inf_λ [n·Λ(λ) − λ·s]),       Λ(λ) = log E_dominating[e^{λ m}]      (Chernoff)

Tokens are not independent on a trained policy: how often its near-ties flip varies from prompt to prompt
(measured: the honest exceedance rate of a prompt spreads as a Gamma law of shape ≈ 0.5 about its mean), and a
pool's whole population may run above its calibration (a policy that drifted). A bound that assumes every token
i.i.d. from the null is then far from valid (issue 45's review: the i.i.d. factor exp(λS − nΛ(λ)) had an
expected value of 10^68 at λ = 8, and simulated honest books, their population at 2 × the null, were challenged
2 % of the time at α = 10^-2 and 9.9 % at α = 10^-6). So the test bounds the honest
worker under the **honest spread** (`MarginNull.spread_shape` k, `MarginNull.miscalibration` c; a pool states
them in its run spec, `verification.spread_shape` and `verification.miscalibration`, by default these):

    given its multiplier G_p, the tokens of a file's prompt p are independent with tails P(m > θ_k | G_p) ≤ c·G_p·q_k,
    G_p ~ Gamma(shape k, mean 1), one per prompt, independent across prompts and files (k = None: G ≡ 1)

Prompts' multipliers are independent because the protocol draws the prompts at random (proofs.assignment: a PRF
of the pool seed, the worker and a nonce the chain fixes, so nothing to grind); it draws distinct dataset indices,
and sampling without replacement makes the G_p negatively associated, which only lowers E[Π_p f_p(G_p)] for
increasing f_p ≥ 0 (Joag-Dev & Proschan 1983). Two completions of one prompt share its G: the test groups them by
their prompt's token ids, so two indices of one text are one prompt.
Where prompts' multipliers might be dependent in any way, one G for all of them is the conservative reading:
Π_i (1 + g_i·x)^{n_i} is a product of positive increasing functions, hence supermodular, and among couplings
with fixed marginals the comonotone one (all G_i equal) maximises its expectation (Tchen 1980); so the one-G
bound of a file's tokens bounds its per-prompt one, and that is what a file whose grouping is not known (a book
written before `FACTOR_VERSION` 3) counts under.

The file's log-MGF under the spread. Given G, scaling every tail by c·G scales every atom's mass by c·G, so
E[e^{λm} | G] ≤ 1 + c·G·a(λ), a(λ) = e^{Λ(λ)} − 1 = Σ_atoms mass·(e^{λx} − 1) ≥ 0 for λ ≥ 0 (where c·G·q_0 > 1
the true tails are capped at 1, which only lowers the MGF, an increasing function of the tails). With
x = c·a(λ) and E[G^j] = Γ(k + j) / (Γ(k)·k^j) for Gamma(k, scale 1/k), the binomial theorem gives the exact

    L_n(λ) = log E_G[(1 + G·x)^n] = log Σ_{j=0..n} C(n, j)·(x/k)^j·Γ(k + j)/Γ(k)
           term_{j+1} / term_j = (n − j)/(j + 1) · (k + j) · x/k                       (`mixture_log_mgf`)

finite at every λ (a polynomial moment of G), ≤ −k·log(1 − n·x/k) where n·x < k (from 1 + y ≤ e^y: the Gamma
MGF), and ≥ n·log(1 + x) (Jensen: the i.i.d. exponent at the null scaled by c). So no λ needs dropping: where
n·x passes k the file's factor is tiny, the price of the honest spread, not an invalid bound.

The per-file test (`MarginNull.log_p_value`, `threshold`): E[e^{λS}] = Π_p E[e^{λS_p}] ≤ exp(Σ_p L_{n_p}(λ)) for
independent prompts, so P(S ≥ s) ≤ exp(min_λ [Σ_p L_{n_p}(λ) − λ·s]) (Chernoff at each λ of FILE_LAMBDAS). log E_G[Y^n]
is convex in n (Lyapunov), so for a fixed total the bound is loosest when the tokens sit in as few prompts as
possible: a 1-prompt file pays the whole spread (bf16 tails, 2,048 tokens at 5·10^-7: S ≥ 26.3 at c = 2), one of 64
prompts little of it (6.4; the i.i.d. bound at c = 1 said 4.9). A completion's tokens are one prompt's: the
per-completion arm bounds each with one G. Without spread (k = None) the grouping does not matter.

For a worker across files, a file's factor exp(λS_f − Σ_p L_{n_p}(λ)) (its checked tokens grouped by prompt, as
the per-file test groups them) has conditional expectation ≤ 1 under the spread, whatever the earlier files
(E[e^{λS_f}] = Π_p E[e^{λS_p}] for independent prompts), so for every fixed λ the product over files is a
supermartingale, and the
average over a fixed grid of λ (`WORKER_LAMBDAS`) is an e-process: by Ville's inequality an honest worker's
accumulated value ever reaches 1/α with probability at most α, however many files it submits and whenever the
validator looks (`worker_log_e_value`). `FACTOR_VERSION` names this meaning of a file's factor (1: i.i.d.; 2: one G a file).

Assumptions (docs/protocol.md states them with the error rates): given a prompt's G, its tokens' margins are
independent (flips need a near-tie and noise that reorders it, both position-local; what a prompt shares is
its near-tie density, which G models); prompts' multipliers are independent of each other (random assignment);
honest rates spread no wider than Gamma(k) about c × the null; and the pool's workers are the calibrated
population (dtype, engine, batch sizes).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

MARGIN_LEVELS = (0.0, 1 / 256, 1 / 64, 1 / 16, 1 / 4, 1 / 2)
"""θ_k at which calibration counts honest margins: 0 (any flip), then geometrically up to half the bound."""
CALIBRATION_CONFIDENCE = 1e-3
"""β: the tails hold with probability ≥ 1 − β over the calibration run (split over the levels)."""
SPREAD_SHAPE = 0.5
"""k: honest exceedance rates spread over prompts as Gamma(k, mean 1) times the null's (issue 45's measurement);
the run spec's default (protocol.runspec.VerificationSpec.spread_shape)."""
MISCALIBRATION = 2.0
"""c: the honest population may run at up to c × the calibrated tails (a policy drifted since calibration); the run
spec's default (protocol.runspec.VerificationSpec.miscalibration)."""
FILE_LAMBDAS = tuple(2.0 ** (k / 4) for k in range(-24, 41))
"""λ grid over which the per-file Chernoff bound is minimised (a bound at any λ is valid): 2^(k/4) from 1/64 to
1,024. Under the spread a file's best λ falls with its tokens per prompt (≈ 0.6 for one prompt of 2,048 bf16
tokens at c = 2, ≈ 1.2 at c = 1), and a quarter-octave step leaves the threshold within ~5 % of the continuous
minimum's (the integer octaves from 1/4 of before: up to 15 % at one prompt, 38 % at four)."""
WORKER_LAMBDAS = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0, 4.0, 16.0, 64.0)
"""The fixed λ of the per-worker e-process (fixed in advance: Ville's inequality needs it). Under the spread a
file's best λ falls as it grows (≈ 1 at 512 bf16 tokens, 1/4 at 2,048), hence the dense small end; 16 and 64
serve pools whose honest margins never pass the first level (float32), where every flip is a rare event."""
FACTOR_VERSION = 3
"""What a file's factor exp(λS − Σ_p L_{n_p}(λ)) means: 3, a multiplier per prompt under the honest spread; 2 (books
before it), one multiplier for the whole file; 1, i.i.d. tokens."""


def mixture_log_mgf(log_excess: float, tokens: int, shape: float | None) -> float:
    """log E_G[(1 + G·x)^tokens], x = e^log_excess, G ~ Gamma(shape, mean 1) (G ≡ 1 for shape None): the log-MGF
    of a file's sum under the spread, x = c·(e^{Λ(λ)} − 1). Exact, as the binomial sum of the module text, in logs."""
    return mixture_log_mgfs((log_excess,), tokens, shape)[0]


@functools.lru_cache(maxsize=16384)
def mixture_log_mgfs(log_excess: tuple[float, ...], tokens: int, shape: float | None) -> tuple[float, ...]:
    """`mixture_log_mgf` at each of several x (a λ grid's) in one array operation."""
    excess = np.asarray(log_excess, dtype=np.float64)
    out = np.zeros_like(excess)
    live = excess > -math.inf
    if tokens <= 0 or not live.any():
        return tuple(out.tolist())
    if shape is None:
        out[live] = tokens * np.logaddexp(0.0, excess[live])
        return tuple(out.tolist())
    j = np.arange(tokens, dtype=np.float64)
    ratios = np.concatenate(([0.0], np.cumsum(np.log((tokens - j) / (j + 1) * (shape + j)))))
    log_terms = ratios + np.outer(excess[live] - math.log(shape), np.arange(tokens + 1, dtype=np.float64))
    top = log_terms.max(axis=1)
    out[live] = top + np.log(np.exp(log_terms - top[:, None]).sum(axis=1))
    return tuple(out.tolist())


def binomial_kl(p: float, q: float) -> float:
    """KL(Bernoulli(p) ‖ Bernoulli(q))."""
    def term(a: float, b: float) -> float:
        return 0.0 if a == 0 else (math.inf if b == 0 else a * math.log(a / b))
    return term(p, q) + term(1 - p, 1 - q)


def tail_bound(exceed: int, trials: int, confidence: float) -> float:
    """An upper bound u on a probability q from `exceed` successes in `trials` independent trials with
    P(q > u) ≤ confidence: the largest u with trials · KL(exceed/trials ‖ u) ≤ log(1/confidence)."""
    if trials <= 0:
        return 1.0
    p = exceed / trials
    budget = math.log(1 / confidence) / trials
    low, high = p, 1.0
    if binomial_kl(p, high) <= budget:
        return 1.0
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if binomial_kl(p, mid) <= budget else (low, mid)
    return high


class MarginNull(BaseModel):
    """The honest margin distribution of a pool, as upper bounds on its tails (see the module text)."""

    model_config = ConfigDict(frozen=True)

    levels: tuple[float, ...] = MARGIN_LEVELS
    tail: tuple[float, ...] = Field(description="q_k ≥ P(margin > levels[k]) per honest token")
    tokens: int = Field(0, ge=0, description="honest tokens the tails were measured on (0: set by hand)")
    spread_shape: float | None = Field(SPREAD_SHAPE, gt=0, description=(
        "k: a file's honest rates are c × the tails times G ~ Gamma(k, mean 1) (None: G = 1, tokens i.i.d.)"))
    miscalibration: float = Field(MISCALIBRATION, ge=1, description="c: the honest population may run at c × the tails")

    @model_validator(mode="after")
    def _shape(self) -> MarginNull:
        if len(self.levels) != len(self.tail) or not self.levels or self.levels[0] != 0.0:
            raise ValueError("one tail bound per level, the first level 0")
        if any(b <= a for a, b in zip(self.levels, self.levels[1:])) or self.levels[-1] >= 1:
            raise ValueError("levels increase and stay below 1")
        if any(not 0 <= q <= 1 for q in self.tail) or any(b > a for a, b in zip(self.tail, self.tail[1:])):
            raise ValueError("tail bounds are probabilities that do not increase with the level")
        return self

    @classmethod
    def fit(cls, exceed: Sequence[int], tokens: int, levels: Sequence[float] = MARGIN_LEVELS,
            confidence: float = CALIBRATION_CONFIDENCE) -> MarginNull:
        """The null from honest counts: exceed[k] of `tokens` margins were above levels[k]."""
        per_level = confidence / len(levels)
        bounds = [tail_bound(e, tokens, per_level) for e in exceed]
        for k in range(len(bounds) - 2, -1, -1):  # a tail cannot grow with the level
            bounds[k] = max(bounds[k], bounds[k + 1])
        return cls(levels=tuple(levels), tail=tuple(bounds), tokens=tokens)

    @classmethod
    def loosest(cls, nulls: Sequence[MarginNull]) -> MarginNull:
        """The null of several populations, each with its own bounds at the same levels: level by level the largest
        tail (it bounds an honest token of any of them), over the fewest tokens any of them was measured on."""
        if not nulls or any(n.levels != nulls[0].levels for n in nulls):
            raise ValueError("one or more nulls, all at the same levels")
        shapes = [n.spread_shape for n in nulls if n.spread_shape is not None]
        return cls(levels=nulls[0].levels, tail=tuple(max(t) for t in zip(*(n.tail for n in nulls))),
                   tokens=min(n.tokens for n in nulls), spread_shape=min(shapes, default=None),
                   miscalibration=max(n.miscalibration for n in nulls))

    def _atoms(self) -> list[tuple[float, float]]:
        """The dominating distribution's non-zero points and their masses: (θ_{k+1}, q_k − q_{k+1}), (1, q_K)."""
        points = [*self.levels[1:], 1.0]
        nexts = [*self.tail[1:], 0.0]
        return [(x, q - q_next) for q, q_next, x in zip(self.tail, nexts, points)]

    def points(self) -> tuple[float, ...]:
        """The value a margin in (θ_k, θ_{k+1}] (θ_{K+1} = 1) counts for in `score`, per k: the highest support
        point of the dominating distribution whose tail bound is still q_k, i.e. θ_{j+1} (1 for j = K) for the
        last level j of the run of levels whose tails equal q_k. Levels whose tails are equal (typically those
        above every honest calibration margin, where the bound is that of 0 exceedances) carry no mass between
        them, so a margin past the first of them is as rare as one at the hard bound and counts as such."""
        support = [*self.levels[1:], 1.0]
        last = len(self.levels) - 1
        out = []
        for k in range(len(self.levels)):
            j = k
            while j < last and self.tail[j + 1] == self.tail[k]:
                j += 1
            out.append(support[j])
        return tuple(out)

    def score(self, margins: Sequence[float]) -> float:
        """The test's statistic of some tokens: the sum of their margins, each rounded up to its point (`points`:
        for a margin in (θ_k, θ_{k+1}], θ_{k+1} or, where the tails above θ_k stay equal, the top of that run;
        0 for 0). For every support point x = θ_{j+1} of the dominating distribution, P(rounded ≥ x) = P(m > θ_a)
        ≤ q_a = q_j, θ_a the first level of j's run of equal tails: the rounded margin is dominated by the same
        distribution as the margin itself, so every bound here holds for the rounded sum; and since it is at
        least the plain sum, the test rejects wherever the plain sum's would. It is what lets a few tokens far
        above the honest noise count as the rare events they are: four at m ≈ 0.75 count 4, not 3, and where no
        honest calibration margin passed 1/4 (q_{1/4} = q_{1/2}), four at m ≈ 0.3 count 4, not 2."""
        points = self.points()
        return float(sum(0.0 if m <= 0 else points[bisect.bisect_left(self.levels, m) - 1] for m in margins))

    def mean(self) -> float:
        """E[X] of the dominating distribution: the largest mean rounded margin per token the null allows an
        honest worker (q_k − q_{k+1} at θ_{k+1}, q_K at 1)."""
        return sum(mass * x for x, mass in self._atoms())

    def log_mgf(self, lam: float) -> float:
        """Λ(λ) of the dominating distribution: log(1 − q_0 + Σ_k (q_k − q_{k+1}) e^{λ θ_{k+1}} + q_K e^λ)."""
        terms = [math.log1p(-self.tail[0]) if self.tail[0] < 1 else -math.inf]
        terms += [math.log(mass) + lam * x for x, mass in self._atoms() if mass > 0]
        top = max(terms)
        return top + math.log(sum(math.exp(t - top) for t in terms))

    def _log_excess(self, lam: float) -> float:
        """log(c·(e^{Λ(λ)} − 1)) = log(c · Σ_atoms mass·(e^{λx} − 1)): x of `mixture_log_mgf` at λ."""
        logs = [math.log(mass) + lam * x + math.log(-math.expm1(-lam * x)) for x, mass in self._atoms() if mass > 0]
        top = max(logs, default=-math.inf)
        log_excess = top if top == -math.inf else top + math.log(sum(math.exp(t - top) for t in logs))
        return math.log(self.miscalibration) + log_excess

    def file_log_mgf(self, lam: float, tokens: int) -> float:
        """L_n(λ): the log-MGF of the sum of `tokens` honest rounded margins under the spread (module text)."""
        return mixture_log_mgf(self._log_excess(lam), tokens, self.spread_shape)

    def _file_exponents(self, prompt_tokens: Sequence[int]) -> list[tuple[float, float]]:
        """(λ, Σ_p L_{n_p}(λ)) per λ of FILE_LAMBDAS: the log-MGF of the rounded margin sum of a file whose prompt p
        holds n_p of its tokens, each prompt with its own multiplier G_p, independent of the others' (module text)."""
        excess = tuple(self._log_excess(lam) for lam in FILE_LAMBDAS)
        total = np.zeros(len(FILE_LAMBDAS))
        for n, count in Counter(n for n in prompt_tokens if n > 0).items():
            total += count * np.asarray(mixture_log_mgfs(excess, n, self.spread_shape))
        return list(zip(FILE_LAMBDAS, total.tolist(), strict=True))

    def log_p_value(self, score: float, prompt_tokens: Sequence[int]) -> float:
        """log of the Chernoff bound on P(S ≥ score) under the spread (≤ 0) for honest tokens of which prompt p
        holds prompt_tokens[p]: min over FILE_LAMBDAS of Σ_p L_{n_p}(λ) − λ·score (module text). A completion's
        tokens are one prompt's: [n]."""
        if sum(prompt_tokens) <= 0 or score <= 0:
            return 0.0
        return min(0.0, min(mgf - lam * score for lam, mgf in self._file_exponents(prompt_tokens)))

    def threshold(self, prompt_tokens: Sequence[int], false_positive_rate: float) -> float:
        """The smallest score whose bound (`log_p_value`) is at most `false_positive_rate`: min over λ of
        (Σ_p L_{n_p}(λ) + log(1/rate)) / λ; ∞ where that exceeds the tokens (no score reaches it)."""
        tokens = sum(prompt_tokens)
        if tokens <= 0:
            return math.inf
        best = min((mgf - math.log(false_positive_rate)) / lam for lam, mgf in self._file_exponents(prompt_tokens))
        return best if best <= tokens else math.inf

    def worker_log_terms(self, score: float, prompt_tokens: Sequence[int]) -> list[float]:
        """log of one file's factor exp(λ·score − Σ_p L_{n_p}(λ)) of the per-worker e-process, per λ of
        WORKER_LAMBDAS (meaning `FACTOR_VERSION`), for a file whose prompt p holds prompt_tokens[p] of its checked
        tokens (a file whose grouping is unknown: [its tokens], one G, conservative). Files judged under different
        nulls (policies with their own tolerances) multiply their own factors: each is a supermartingale step under
        its file's null."""
        excess = tuple(self._log_excess(lam) for lam in WORKER_LAMBDAS)
        total = np.zeros(len(WORKER_LAMBDAS))
        for n, count in Counter(n for n in prompt_tokens if n > 0).items():
            total += count * np.asarray(mixture_log_mgfs(excess, n, self.spread_shape))
        return [lam * score - mgf for lam, mgf in zip(WORKER_LAMBDAS, total.tolist(), strict=True)]

    def worker_log_e_value(self, score: float, prompt_tokens: Sequence[int]) -> float:
        """log of the e-process of one file's score under this null (its prompts' tokens `prompt_tokens`), or of
        several files' totals counted as one file of one prompt (one G for them all: conservative, module text):
        mean over WORKER_LAMBDAS of exp(λ·score − Σ_p L_{n_p}(λ)). An honest worker's ever reaches log(1/α) with
        probability ≤ α."""
        return log_e_value(self.worker_log_terms(score, prompt_tokens))


def log_e_value(log_terms: Sequence[float]) -> float:
    """log of the mean over WORKER_LAMBDAS of exp(term): the e-process from the per-λ sums of files' log factors."""
    top = max(log_terms)
    return top + math.log(sum(math.exp(t - top) for t in log_terms) / len(log_terms))


class MarginTest(BaseModel):
    """One file's (or one set of completions') margin test: its evidence if challenged."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    tokens: int
    score: float
    prompt_tokens: list[int] = Field(default_factory=list)
    """The checked tokens of each of the file's prompts, in order of first appearance: the bound's grouping."""
    log_p_value: float
    """Chernoff bound on the file's sum under the spread, a multiplier per prompt (natural log)."""
    worst_completion: int | None = None
    """Index (into the completions tested) of the completion with the smallest bound."""
    worst_completion_log_p_value: float = 0.0
    """Its bound, times the number of completions (Bonferroni), as a log."""
    false_positive_rate: float
    threshold: float
    """The score at which this file's grouping of its tokens would be challenged (the per-file test alone)."""


def margin_test(completions: Sequence[tuple[int, float]], prompts: Sequence[Hashable], null: MarginNull,
                false_positive_rate: float) -> MarginTest:
    """Test a file from its completions' (tokens, sum of margins) and each completion's prompt (`prompts[i]`, any
    key: equal keys are one prompt): challenged when the file's sum, under a multiplier per prompt, or its most
    deviant completion's (Bonferroni over the completions), is less likely than `false_positive_rate` / 2 under
    the null."""
    if len(prompts) != len(completions):
        raise ValueError(f"one prompt per completion: {len(prompts)} for {len(completions)}")
    per_prompt: dict[Hashable, int] = {}
    for (n, _), prompt in zip(completions, prompts):
        per_prompt[prompt] = per_prompt.get(prompt, 0) + n
    prompt_tokens = [n for n in per_prompt.values() if n > 0]
    tokens = sum(prompt_tokens)
    score = sum(s for _, s in completions)
    half = math.log(false_positive_rate / 2)
    file_log_p = null.log_p_value(score, prompt_tokens)
    per_completion = [null.log_p_value(s, [n]) for n, s in completions]
    worst = min(range(len(per_completion)), key=per_completion.__getitem__, default=None)
    worst_log_p = min(0.0, per_completion[worst] + math.log(len(completions))) if worst is not None else 0.0
    return MarginTest(passed=file_log_p > half and worst_log_p > half, tokens=tokens, score=score,
                      prompt_tokens=prompt_tokens, log_p_value=file_log_p, worst_completion=worst,
                      worst_completion_log_p_value=worst_log_p, false_positive_rate=false_positive_rate,
                      threshold=null.threshold(prompt_tokens, false_positive_rate / 2))
