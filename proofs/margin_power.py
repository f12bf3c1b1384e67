"""The margin test's power against a small logit bias, as a function of a file's checked tokens (docs/protocol.md R8.6).

The bias (adversaries.samplers.logit_biased): a worker adds b = STEERING_BIAS_EPS·ε to the logits of some tokens
(the answer's), ε the pool's logit tolerance, and samples with the pool's seeds. Every token stays within the
replay's per-token bound 2ε/T; what changes is that a biased token whose score is within b/T of the best is drawn
instead of it. Near a tie, score gaps are spread evenly, so such flips come at a rate ρ = NEAR_TIE_DENSITY·b/T per
token (a Poisson count over a file's tokens), and a flip's gap is uniform on (0, b/T): its margin
(proofs.margins: gap / (2ε/T)) is uniform on (0, STEERING_BIAS_EPS/2]. The 2·GUMBEL_TOLERANCE of the replay's bound
(10^-5, against ε/T ≥ 10^-3 in every shipped spec) is left out; it would lower a flip's margin by about 1 %.

The test (proofs.margins.margin_test) challenges a file whose score reaches the null's threshold for its checked
tokens per prompt at false_positive_rate / 2 (a multiplier per prompt: the fewer prompts hold the tokens, the
higher it is). A pool's power is stated for its checked tokens packed into as few prompts as hold them
(`packed_prompts`, a prompt's group at most: group_size × max_tokens), which no draw of the spot check falls below.
The power here is P(S ≥ threshold) with S the flips' rounded margins (`MarginNull.points`) alone: the honest noise of the other tokens and the test's per-completion arm only add to
what is caught, so in those respects it is a lower bound. Flip margins are rounded down to a grid of 1/GRID before
the compound Poisson law of S is summed (Panjer's recursion), which lowers it again; for thresholds past MAX_CELLS
cells the miss probability is Chernoff's bound on it.

NEAR_TIE_DENSITY is a property of the policy, measured once (docs/notes/attacks.md): the 1.9ε bias at bench.attacks'
bf16 profile (ε = 0.0203, T = 1) held 3.07 flips in files of 545 checked tokens. On that pool the model predicts
what bench.file_size measured (tests/unit/proofs/test_margin_power.py); a policy with more near-ties is caught
sooner, one with fewer later.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from proofs.margins import MarginNull

STEERING_BIAS_EPS = 1.9
"""The documented bias, in units of the pool's logit tolerance ε: the largest round multiple under the per-token
bound's 2ε (adversaries.samplers.logit_biased)."""
NEAR_TIE_DENSITY = 3.07 / 545 / (STEERING_BIAS_EPS * 0.0203)
"""Flips a checked token per unit of score gap (≈ 0.146): 3.07 flips in 545 tokens for b/T = 1.9 × 0.0203."""
GRID = 1024
"""Flip margins are summed on a grid of 1/GRID (each rounded down)."""
MAX_CELLS = 50_000
"""The recursion's length at most (a threshold of ~49): past it the miss probability is bounded by Chernoff's bound
instead (`_chernoff_miss`), which only lowers the power."""


def flip_points(null: MarginNull, bias_eps: float = STEERING_BIAS_EPS) -> list[tuple[float, float]]:
    """What one flip adds to the test's score: (rounded margin, probability) per level interval of the null, for a
    margin uniform on (0, min(1, bias_eps / 2)]."""
    top = min(1.0, bias_eps / 2)
    edges = [*null.levels, 1.0]
    out = []
    for k, point in enumerate(null.points()):
        width = max(0.0, min(edges[k + 1], top) - edges[k])
        if width > 0:
            out.append((point, width / top))
    return out


def flip_rate(logit_tolerance: float, temperature: float, bias_eps: float = STEERING_BIAS_EPS,
              density: float = NEAR_TIE_DENSITY) -> float:
    """Expected flips a checked token under a bias of `bias_eps`·ε: density × b / T."""
    return density * bias_eps * logit_tolerance / temperature


def packed_prompts(tokens: int, per_prompt: int) -> list[int]:
    """`tokens` checked tokens in as few prompts as hold them, `per_prompt` a prompt at most (the last one the rest):
    the grouping whose threshold is highest (module text), so the least power any grouping of them has."""
    if per_prompt <= 0:
        raise ValueError(f"a prompt holds at least one token, not {per_prompt}")
    full, rest = divmod(max(0, tokens), per_prompt)
    return [per_prompt] * full + ([rest] if rest else [])


def bias_power(null: MarginNull, prompt_tokens: Sequence[int], false_positive_rate: float, logit_tolerance: float,
               temperature: float, bias_eps: float = STEERING_BIAS_EPS, density: float = NEAR_TIE_DENSITY) -> float:
    """The probability that the margin test (at `false_positive_rate` a file) challenges a file sampled with the
    bias whose prompt p holds prompt_tokens[p] of its checked tokens (see the module text; a lower bound in the
    ways it states)."""
    tokens = sum(prompt_tokens)
    if tokens <= 0:
        return 0.0
    threshold = null.threshold(prompt_tokens, false_positive_rate / 2)
    if math.isinf(threshold):
        return 0.0
    rate = tokens * flip_rate(logit_tolerance, temperature, bias_eps, density)
    if rate <= 0:
        return 0.0
    points = flip_points(null, bias_eps)
    cells = math.ceil(threshold * GRID)  # S < threshold: grid cells 0 .. cells - 1
    if cells > MAX_CELLS:
        return 1.0 - _chernoff_miss(points, rate, threshold)
    atoms = [(j, p) for j, p in ((math.floor(x * GRID), p) for x, p in points) if j > 0 and p > 0]
    # compound Poisson (Panjer): f_0 = e^(-rate·P(a flip adds something)), f_s = Σ_j (rate·j·p_j / s)·f_{s-j}
    log_f = [-rate * sum(p for _, p in atoms)]
    atoms = [(j, math.log(rate * j * p)) for j, p in atoms]
    for s in range(1, cells):
        terms = [c + log_f[s - j] for j, c in atoms if j <= s and log_f[s - j] > -math.inf]
        if not terms:
            log_f.append(-math.inf)
            continue
        top = max(terms)
        log_f.append(top + math.log(sum(math.exp(t - top) for t in terms)) - math.log(s))
    top = max(log_f)
    missed = math.exp(top + math.log(sum(math.exp(f - top) for f in log_f))) if top > -math.inf else 0.0
    return min(1.0, max(0.0, 1.0 - missed))


def _chernoff_miss(points: list[tuple[float, float]], rate: float, threshold: float) -> float:
    """An upper bound on P(S < threshold) for S compound Poisson (`rate` flips, each adding x with probability p):
    min over s ≥ 0 of exp(s·threshold + rate·(E[e^(-s·x)] − 1)). Used where the threshold is too far for the
    recursion; there the bias's score is typically far past it."""
    best = 0.0
    for k in range(-12, 13):
        s = 2.0**k
        best = min(best, s * threshold + rate * (sum(p * math.exp(-s * x) for x, p in points) - 1))
    return math.exp(best)

def tokens_for_power(null: MarginNull, power: float, per_prompt: int, false_positive_rate: float,
                     logit_tolerance: float, temperature: float, most: int, bias_eps: float = STEERING_BIAS_EPS,
                     density: float = NEAR_TIE_DENSITY) -> int | None:
    """The fewest checked tokens, at most `most`, packed `per_prompt` a prompt (`packed_prompts`), at which
    `bias_power` reaches `power` (bisection: the power grows with the tokens but for the steps of the threshold, so
    this is the least such count to within a few tokens); None when even `most` does not."""
    def reaches(n: int) -> bool:
        return bias_power(null, packed_prompts(n, per_prompt), false_positive_rate, logit_tolerance, temperature,
                          bias_eps, density) >= power

    if most <= 0 or not reaches(most):
        return None
    low, high = 0, most  # reaches(high); not known for low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return high
