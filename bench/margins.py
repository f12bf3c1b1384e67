"""The margin test's power against the calibration's size (issue 26): `python -m bench.margins [--files 20]`.

Qwen2-style fixture (V = 2,048), bf16 worker, float32 validator, ε = 2 × the bf16 worker's measured logit noise.
The null is calibrated on the same honest contexts twice: one seed per position (each honest token once, as
`validator calibrate` did before many-seed replay) and `--seeds` public seeds per position
(proofs.sampling.honest_margins: one prefill serves them all). Files of 64 × 32-token completions from an honest
sampler, a sampler at T × 0.95, and one adding 0.9ε to a tenth of the vocabulary's logits are scored under each
null (its honest spread included, proofs.margins): the per-file threshold at 10^-6, the files it challenges, and
after how many files the per-worker e-process (each file's factor multiplied) reaches log(10^6). Prints one JSON line per null.

`python -m bench.margins --spread [--files 1000000]`: the per-file test under the honest spread (a multiplier per
prompt, proofs.margins; decision 0010), no model: the thresholds at 5·10^-7 (a stated 10^-6 halved) of a 2,048-token
file in 1, 4, 16 and 64 prompts at c = 1 and 2 (the suite's bf16 tails, SPREAD_TAILS); the rate at which simulated
honest files at the edge of the spread (proofs.honest_spread: each prompt's rates c × the tails × its own
Gamma(0.5)) reach the file arm's threshold at each rate, for 1-prompt and 64-prompt files, beside the i.i.d. bound's;
and the per-file power against the 1.9ε bias (proofs.margin_power, bench.attacks' bf16 profile, POWER_TAILS) by
checked tokens and prompts, with the checked tokens 99 % of files need at 256 tokens a prompt.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import inference.torch_backend as torch_backend
from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from examples.hf_models import qwen2_style
from inference.policy import load_policy
from inference.torch_backend import NO_EOS, TorchBackend
from proofs.honest_spread import honest_file_scores
from proofs.margin_power import bias_power, packed_prompts, tokens_for_power
from proofs.margins import MARGIN_LEVELS, WORKER_LAMBDAS, MarginNull, log_e_value
from proofs.sampling import honest_margins, replay
from protocol.runspec import SamplingSpec

SAMPLING = SamplingSpec(temperature=1.0, max_tokens=32)
RATE = 1e-6
SPREAD_TAILS = (9.6e-4, 9.0e-4, 7.9e-4, 4.7e-4, 3.2e-5, 3.2e-5)
"""The suite's bf16 tails (tests/unit/proofs/test_margin_spread.py; decision 0010's figures)."""
POWER_TAILS = (1.60e-3, 1.52e-3, 1.28e-3, 5.50e-4, 1.75e-5, 1.75e-5)
"""bench.attacks' bf16 profile, the noisiest population's null (docs/protocol.md R8.6), at ε = POWER_EPS."""
POWER_EPS = 0.0203
SPREAD_FILE = 2_048
SPREAD_PROMPTS = (1, 4, 16, 64)
PACKED = 256
"""Checked tokens a prompt holds at most in bench.attacks' files (16 completions × 16 tokens)."""


def spread(files: int, seed: int = 0) -> dict:
    """The per-file test under the honest spread (module text): thresholds, simulated honest rates, power."""
    rng = np.random.default_rng(seed)
    out: dict = {"file_tokens": SPREAD_FILE, "honest_files": files, "thresholds": {}, "honest": [], "power": {}}
    for c in (1.0, 2.0):
        null = MarginNull(tail=SPREAD_TAILS, miscalibration=c)
        iid = null.model_copy(update={"spread_shape": None, "miscalibration": 1.0})
        out["thresholds"][f"c={c:g}"] = {
            **{f"P={p}": round(null.threshold(_shares(SPREAD_FILE, p), RATE / 2), 2) for p in SPREAD_PROMPTS},
            "iid": round(iid.threshold([SPREAD_FILE], RATE / 2), 2)}
        for p in (1, 64):
            groups = _shares(SPREAD_FILE, p)
            scores = honest_file_scores(null, groups, files, rng)
            for alpha in (1e-2, 1e-3, 1e-4, RATE / 2):
                out["honest"].append({"c": c, "prompts": p, "stated": alpha,
                                      "rate": float((scores >= null.threshold(groups, alpha)).mean()),
                                      "iid_rate": float((scores >= iid.threshold(groups, alpha)).mean())})
        power_null = MarginNull(tail=POWER_TAILS, tokens=536_320, miscalibration=c)
        by_tokens = {}
        for tokens in (545, 1_090, 2_185, 4_384, 8_192):
            row = {f"P={p}": bias_power(power_null, _shares(tokens, p), RATE, POWER_EPS, 1.0) for p in SPREAD_PROMPTS}
            row[f"packed {PACKED}"] = bias_power(power_null, packed_prompts(tokens, PACKED), RATE, POWER_EPS, 1.0)
            by_tokens[tokens] = {k: round(v, 3) for k, v in row.items()}
        out["power"][f"c={c:g}"] = {"by_tokens": by_tokens, "tokens_for_99pct": {
            f"{per} a prompt": tokens_for_power(power_null, 0.99, per, RATE, POWER_EPS, 1.0, 100_000)
            for per in (32, PACKED, 1_024)}}
    iid = MarginNull(tail=POWER_TAILS, tokens=536_320, spread_shape=None, miscalibration=1.0)
    out["power"]["iid"] = {"tokens_for_99pct": tokens_for_power(iid, 0.99, PACKED, RATE, POWER_EPS, 1.0, 100_000)}
    return out


def _shares(tokens: int, prompts: int) -> list[int]:
    """`tokens` in `prompts` equal shares (the last takes the rest)."""
    return [tokens // prompts] * (prompts - 1) + [tokens - tokens // prompts * (prompts - 1)]


def _generate(folder: Path, indices, tilt) -> list[tuple[list[int], list[int], int]]:
    """bf16 completions of prompts `indices`, the worker sampling from tilt(logits)."""
    model, tokenizer = load_policy(folder)
    worker = TorchBackend(model, compute_dtype=torch.bfloat16, eos_token_id=NO_EOS, pad_token_id=tokenizer.pad_token_id)
    prompts = [[5 + i % 50, 7, 9 + i % 7] for i in indices]
    seeds = [10_000 + i for i in indices]
    honest_rule = torch_backend.sample_tokens
    torch_backend.sample_tokens = lambda logits, *a, **k: honest_rule(tilt(logits), *a, **k)
    try:
        completions = worker.generate(prompts, SAMPLING, seeds)
    finally:
        torch_backend.sample_tokens = honest_rule
    return [(p, c.token_ids, s) for p, c, s in zip(prompts, completions, seeds)]


def _file_score(null: MarginNull, file: list[tuple[tuple[int, ...], list[float]]]) -> tuple[list[int], int, float]:
    """A file's tokens per prompt (the per-file bound's grouping), its tokens and its rounded margin sum."""
    per_prompt: dict[tuple[int, ...], int] = {}
    for prompt, margins in file:
        per_prompt[prompt] = per_prompt.get(prompt, 0) + len(margins)
    return list(per_prompt.values()), sum(per_prompt.values()), sum(null.score(margins) for _, margins in file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=384, help="honest calibration completions (32 tokens each)")
    parser.add_argument("--seeds", type=int, default=256, help="public seeds per calibration position")
    parser.add_argument("--files", type=int, default=None,
                        help="files per sampler (default 20); with --spread, simulated honest files (default 10^6)")
    parser.add_argument("--spread", action="store_true", help="the per-file test under the honest spread, no model")
    add_record_option(parser)
    args = parser.parse_args(argv)
    if args.files is not None and args.files < 1:
        parser.error(f"--files must be at least 1, got {args.files}")
    if args.spread:
        started = time.perf_counter()
        figures = spread(args.files or 1_000_000)
        figures["seconds"] = round(time.perf_counter() - started, 1)
        emit(figures, args, "margins", argv)
        return 0
    args.files = args.files or 20
    torch.manual_seed(0)
    started = time.perf_counter()
    folder = qwen2_style(Path(tempfile.mkdtemp()) / "qwen2", vocab=2048)
    model, _ = load_policy(folder)
    validator = TorchBackend(model, eos_token_id=NO_EOS)
    own_model, _ = load_policy(folder)
    own = TorchBackend(own_model, compute_dtype=torch.bfloat16, eos_token_id=NO_EOS)
    contexts = _generate(folder, range(args.contexts), lambda x: x)
    pairs = [(p, ids) for p, ids, _ in contexts]
    reference, theirs = validator.prefill_batch(pairs), own.prefill_batch(pairs)
    eps = 2 * max(float((a.logits - b.logits.float()).abs().max()) for a, b in zip(reference, theirs))
    levels = torch.tensor(MARGIN_LEVELS)
    nulls, lines = {}, []
    for seeds in (1, args.seeds):
        exceed, tokens = torch.zeros(len(levels), dtype=torch.int64), 0
        for (_, ids, seed), ref, mine in zip(contexts, reference, theirs):
            margins = honest_margins(ref.logits, mine.logits, torch.tensor([seed + 7919 * k for k in range(seeds)]),
                                     1.0, 1.0, eps).flatten()
            exceed += (margins[:, None] > levels).sum(0)
            tokens += margins.numel()
        nulls[seeds] = MarginNull.fit(exceed.tolist(), tokens)
    bias = torch.zeros(2048)
    bias[::10] = 0.9 * eps
    samplers = {"honest": lambda x: x, "T x 0.95": lambda x: x / 0.95, "bias 0.9 eps": lambda x: x + bias.to(x.dtype)}
    margins_of: dict[str, list[list[tuple[tuple[int, ...], list[float]]]]] = {}  # per sampler, file: (prompt, margins)
    for name, tilt in samplers.items():
        margins_of[name] = []
        for f in range(args.files):
            rows = _generate(folder, range(10_000 + 64 * f, 10_064 + 64 * f), tilt)
            prefills = validator.prefill_batch([(p, ids) for p, ids, _ in rows])
            margins_of[name].append([(tuple(p), replay(pre.logits, ids, seed, 1.0, 1.0, eps).margins)
                                     for (p, ids, seed), pre in zip(rows, prefills)])
    for seeds, null in nulls.items():
        scores = {name: [_file_score(null, file) for file in files] for name, files in margins_of.items()}
        out = {"seeds_per_position": seeds, "calibration_tokens": null.tokens, "eps": eps,
               "tail": [float(f"{q:.3g}") for q in null.tail],
               "file_threshold": null.threshold(scores["honest"][0][0], RATE / 2)}
        for name, files in scores.items():
            caught = sum(null.log_p_value(s, grouped) < math.log(RATE / 2) for grouped, _, s in files)
            sums, crossed = [0.0] * len(WORKER_LAMBDAS), None
            for k, (grouped, _, s) in enumerate(files, start=1):  # each file's factor, as validator.worker_margins
                sums = [a + b for a, b in zip(sums, null.worker_log_terms(s, grouped))]
                if crossed is None and log_e_value(sums) >= math.log(1 / RATE):
                    crossed = k
            out[name] = {"mean_score": round(sum(s for *_, s in files) / len(files), 3), "files_caught": caught,
                         "files": len(files), "worker_caught_after_files": crossed,
                         "worker_log_e": round(log_e_value(sums), 2)}
        print(json.dumps(out), flush=True)
        lines.append(out)
    seconds = round(time.perf_counter() - started, 1)
    emit({"seconds": seconds}, args, "margins", argv, figures={"nulls": lines, "seconds": seconds})
    return 0


if __name__ == "__main__":
    exit_on_signals()
    raise SystemExit(main())
