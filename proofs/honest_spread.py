"""Honest files under the spread, simulated: what benches and tests hold the margin test's stated rates against.

A file's prompt p holds n_p checked tokens; its tails are the null's times scale · G_p (capped at 1), G_p ~ Gamma(k,
mean 1), independent across prompts (the protocol assigns prompts at random); given G_p its tokens are independent
draws from the dominating distribution with those tails (proofs.margins), whose support points are what
`MarginNull.score` rounds to. That is the edge of what the per-file bound allows: a population at scale = the
null's miscalibration c, spread no wider than its Gamma(k), with every honest margin at the top of its interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from proofs.margins import MarginNull

CHUNK = 1 << 22
"""Prompt draws held at once (files × prompts), so that millions of files fit in memory."""


def honest_file_scores(null: MarginNull, prompt_tokens: Sequence[int], files: int, rng: np.random.Generator,
                       scale: float | None = None, shape: float | None = None) -> np.ndarray:
    """Rounded margin sums of `files` honest files whose prompt p holds prompt_tokens[p] tokens (see the module
    text); scale defaults to the null's miscalibration and shape to its spread_shape (None: G ≡ 1)."""
    scale = null.miscalibration if scale is None else scale
    shape = null.spread_shape if shape is None else shape
    counts = np.asarray(prompt_tokens, dtype=np.int64)
    tails = np.asarray(null.tail)
    points = np.array([*null.levels[1:], 1.0])
    out = np.empty(files)
    step = max(1, CHUNK // max(1, len(counts)))
    for start in range(0, files, step):
        size = min(step, files - start)
        g = np.ones((size, len(counts))) if shape is None else rng.gamma(shape, 1 / shape, (size, len(counts)))
        flipped = rng.binomial(np.broadcast_to(counts, g.shape), np.minimum(1.0, scale * g * tails[0]))
        where = np.nonzero(flipped)  # only prompts with a margin above 0 need its level drawn (few of them)
        scaled = np.minimum(1.0, scale * g[where][:, None] * tails)
        masses = scaled - np.concatenate([scaled[:, 1:], np.zeros_like(scaled[:, :1])], axis=-1)
        left, rest, score = flipped[where], scaled[:, 0], np.zeros(len(where[0]))
        for atom, point in enumerate(points):  # a multinomial over the atoms, as successive binomials
            drawn = rng.binomial(left, np.clip(masses[:, atom] / np.maximum(rest, 1e-300), 0.0, 1.0))
            score, left, rest = score + drawn * point, left - drawn, rest - masses[:, atom]
        out[start:start + size] = np.bincount(where[0], weights=score, minlength=size)
    return out
