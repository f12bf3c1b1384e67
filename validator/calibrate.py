"""`validator calibrate`: TOPLOC thresholds and logit tolerance measured on a checkpoint, not guessed.

Honest workers differ from the validator's float32 reference in their compute (dtype, batch size, kernels),
so their hidden states and logits carry noise. Calibration generates honest completions of the run spec's
task for every (worker dtype, batch size) asked for, with proofs from the worker's own hidden states, and
measures against the validator's reference prefill:

- per TOPLOC chunk: exponent mismatches, mantissa error mean (without the chunk's largest error) and
  median (proofs.toploc.verify_proofs);
- the logit noise: the largest |worker logit − reference logit| over every position and vocabulary entry
  (the worker side is a prefill in the worker's dtype and batch; that is what replay must tolerate);

and, once the tolerance is set, the honest margin tails of the sampler test (`margin_null`: every honest position
replayed under `--seeds-per-position` public seeds from one prefill by the validator and one by the worker).

It writes the `[verification]` table of a run spec: the logit tolerance is the worst honest noise × margin; TOPLOC's
limits are fitted per chunk length for the stated per-file false-positive rate (`toploc_limits`, never below the
worst honest value × margin); the margin tails are upper confidence bounds. A pool whose workers run several dtypes
calibrates with all of them: the loosest honest case sets the thresholds.

    validator calibrate --checkpoint DIR --run-spec examples/run.toml [--backend torch|vllm]
        [--dtypes float32,bfloat16] [--batch-sizes 1,8] [--prompts 128] [--seeds-per-position 64] [--margin 2.0] [--out thresholds.toml]
        [--worker-device cuda]
    validator calibrate --pool N --out thresholds.toml [--every K] [chain options] [the options above]

With `--pool` the checkpoint is the pool's newest policy and the run spec the pool's own, both read from the chain
and IPFS; with `--every K` it keeps running and recalibrates each time the pool has published K more policies,
rewriting `--out` atomically. That is the pool owner's half of "thresholds that follow the policy"
(docs/protocol.md): `trainer start --policy-verification thresholds.toml` attaches the file's tolerances to every
policy it publishes, because training sharpens a policy and the honest noise grows with it.

The reference is always the validator's: float32 on the CPU. A pool whose workers run on GPUs calibrates
with `--worker-device cuda` (torch backend) or `--backend vllm`, so the GPU kernels' noise is what is
measured; noise measured with CPU bf16 kernels is not the same population.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cli.devnet import load_devnet_info
from cli.errors import UsageError
from cli.options import resolve_chain_args
from inference.backend import InferenceBackend
from inference.device import ComputeChoiceError, parse_device
from inference.policy import load_policy, stop_token_ids
from inference.torch_backend import TorchBackend
from inference.verify import FP32_THRESHOLDS
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state
from ledger_client.ipfs.checkpoints import fetch_checkpoint
from ledger_client.ipfs.checkpoints.files import atomic_write
from ledger_client.ipfs.content import fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient
from proofs.margin_power import packed_prompts
from proofs.margins import CALIBRATION_CONFIDENCE, MARGIN_LEVELS, MarginNull, tail_bound
from proofs.sampling import SEED_BITS, derive_seed, honest_margins
from proofs.toploc import (
    COUNTED_FROM_TOKENS,
    DEFAULT_CHUNK,
    MISSING_STAT,
    build_proofs_batch,
    n_chunks,
    verify_proofs,
)
from proofs.toploc_thresholds import DEFAULT_TOPK, ChunkLimits
from protocol.runspec import RunSpec, VerificationSpec, load_run_spec
from protocol.spotcheck import MAX_BPS
from tasks.encoding import encode_prompt
from tasks.registry import build_task

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CALIBRATION_WORKER = "0x" + "ca" * 20
CHUNK_BUCKETS = tuple(2**k for k in range(DEFAULT_CHUNK.bit_length()))
"""Chunk lengths (tokens) whose limits are fitted apart: 1, 2, 4, …, DEFAULT_CHUNK (each bucket holds the lengths
above the previous one)."""
MEDIAN_SLACK = 1.0
SEED_STRIDE = 0x9E3779B97F4A7C15
"""The k-th extra seed of a calibration position is (its seed + k × this) mod 2^63 (public, like every seed)."""
"""Mantissa ulps the median threshold always lies above the worst honest chunk's median."""


@dataclass
class Noise:
    """The worst honest values seen so far."""

    min_exp_matches: int = 128
    max_mant_err_mean: float = 0.0
    max_mant_err_median: float = 0.0
    max_logit_diff: float = 0.0
    chunks: int = 0
    cases: list[dict] = field(default_factory=list)
    by_tokens: dict[int, list[tuple[int, float, float, str]]] = field(default_factory=dict, repr=False)
    """Every honest chunk's (exponent mismatches, mantissa error mean without its max, median, population: the
    worker's dtype and batch size), per chunk-length bucket (CHUNK_BUCKETS: the bucket b holds chunks of more
    tokens than the bucket before and at most b)."""
    samples: list[tuple[list[int], list[int], int, str]] = field(default_factory=list, repr=False)
    """The honest completions (prompt, tokens, seed, worker dtype), for the margin pass once the tolerance is known."""

    def add_chunks(self, results: list, topk: int, population: str = "") -> None:
        for r in results:
            self.chunks += 1
            self.min_exp_matches = min(self.min_exp_matches, topk - math.ceil(r.exp_mismatches * topk / r.n_points))
            if math.isfinite(r.mant_err_mean):
                self.max_mant_err_mean = max(self.max_mant_err_mean, r.mean_without_max())
                self.max_mant_err_median = max(self.max_mant_err_median, r.mant_err_median)
            bucket = next(b for b in CHUNK_BUCKETS if b >= r.n_tokens)
            self.by_tokens.setdefault(bucket, []).append(
                (r.exp_mismatches, r.mean_without_max(), r.mant_err_median, population))


def measure(folder: Path, spec: RunSpec, dtypes: list[str], batch_sizes: list[int], n_prompts: int,
            worker_backend: str = "torch", worker_device: str = "cpu") -> Noise:
    """Honest noise of `folder`'s checkpoint for every (dtype, batch size), against the float32 reference
    on the CPU; the worker's torch backend runs on `worker_device`."""
    reference_model, tokenizer = load_policy(folder)
    stops = stop_token_ids(reference_model, tokenizer)
    reference = TorchBackend(reference_model, eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
    task = build_task(spec.task)
    prompts = [encode_prompt(tokenizer, task.problem(i).prompt) for i in range(n_prompts)]
    noise = Noise()
    for dtype in dtypes:
        worker = _worker(folder, dtype, worker_backend, stops, tokenizer.pad_token_id, worker_device)
        for batch in batch_sizes:
            before = (noise.min_exp_matches, noise.max_mant_err_mean, noise.max_logit_diff)
            for start in range(0, len(prompts), batch):
                group = prompts[start : start + batch]
                seeds = [derive_seed(spec.pool_seed_bytes, CALIBRATION_WORKER, bytes(32), start + i)
                         for i in range(len(group))]
                completions = worker.generate(group, spec.sampling, seeds)
                proofs = build_proofs_batch([c.hidden for c in completions], chunk=DEFAULT_CHUNK)
                pairs = [(p, c.token_ids) for p, c in zip(group, completions)]
                honest = reference.prefill_batch(pairs)
                theirs = worker.prefill_batch(pairs)
                noise.samples += [(p, c.token_ids, s, dtype) for p, c, s in zip(group, completions, seeds)]
                population = f"{dtype}, batch {batch}"
                for ref, own, proof, completion in zip(honest, theirs, proofs, completions):
                    noise.add_chunks(verify_proofs(ref.hidden, proof, chunk=DEFAULT_CHUNK), DEFAULT_TOPK, population)
                    noise.add_chunks(_short_chunks(ref.hidden, completion.hidden, len(noise.samples)), DEFAULT_TOPK,
                                     population)
                    diff = float((ref.logits.float() - own.logits.float().to(ref.logits.device)).abs().max())
                    noise.max_logit_diff = max(noise.max_logit_diff, diff)
            noise.cases.append({"dtype": dtype, "batch": batch, "min_exp_matches": noise.min_exp_matches,
                                "max_mant_err_mean": noise.max_mant_err_mean, "max_logit_diff": noise.max_logit_diff,
                                "worsened": before != (noise.min_exp_matches, noise.max_mant_err_mean,
                                                       noise.max_logit_diff)})
    return noise


def _short_chunks(reference: torch.Tensor, worker: torch.Tensor, turn: int) -> list:
    """One chunk per shorter bucket of CHUNK_BUCKETS: the completion's first t tokens, t cycling through the
    bucket's lengths with `turn`. A completion's last chunk can have any length, and a causal model's first t
    hidden states are those of the t-token completion, so every completion measures every bucket."""
    lengths = [low + 1 + turn % (high - low) for low, high in zip((0, *CHUNK_BUCKETS), CHUNK_BUCKETS[:-1])]
    lengths = [t for t in lengths if t <= worker.shape[0]]
    proofs = build_proofs_batch([worker[:t] for t in lengths], chunk=DEFAULT_CHUNK)
    return [r for t, proof in zip(lengths, proofs) for r in verify_proofs(reference[:t], proof, chunk=DEFAULT_CHUNK)]


def tail_limit(values: Sequence[float], rate: float, step: float, confidence: float = CALIBRATION_CONFIDENCE) -> float:
    """A limit that an honest value exceeds with probability at most `rate` under an exponential tail fitted to
    `values` (peaks over the 90 % quantile u: P(X > u + x) = P(X > u)·e^(−x/σ)), with P(X > u) and σ taken at
    their upper confidence bounds; never below the largest value measured. `step` is the statistic's resolution
    (the tail's scale is at least one step). The exponential tail is the model: bf16 rounding noise has lighter
    tails (binomial flip counts, means of bounded errors), for which it is conservative."""
    ordered = sorted(values)
    u = ordered[int(0.9 * (len(ordered) - 1))]
    excess = [v - u for v in ordered if v > u]
    above = tail_bound(len(excess), len(ordered), confidence / 2)
    k = max(len(excess), 10)  # below 10 excesses the scale is the model's guess: their sum + a step over 10
    z = math.sqrt(2) * _inverse_erfc(confidence)  # the Gamma(k) sum's lower quantile (Wilson-Hilferty)
    low = k * max(0.05, 1 - 1 / (9 * k) - z / (3 * math.sqrt(k))) ** 3
    scale = (sum(excess) + step) / low
    limit = u + scale * math.log(above / rate) if above > rate else u
    return max(limit, ordered[-1])


def _inverse_erfc(p: float) -> float:
    """x with erfc(x) = p (bisection; p in (0, 1))."""
    low, high = 0.0, 10.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if math.erfc(mid) > p else (low, mid)
    return high


def toploc_limits(noise: Noise, margin: float, per_chunk_rate: float) -> list[ChunkLimits]:
    """Each chunk-length bucket's limits: per statistic the fitted tail limit at `per_chunk_rate` (the file's rate
    split over its chunks and the three statistics), or the worst honest value widened by the margin where that
    is looser (never tighter than the worst-case rule before tails were fitted)."""
    out = []
    for tokens, chunks in sorted(noise.by_tokens.items()):
        mismatches, means, medians, _ = (list(column) for column in zip(*chunks))
        shortest = max((b for b in CHUNK_BUCKETS if b < tokens), default=0) + 1
        counted = shortest >= COUNTED_FROM_TOKENS  # the chunk-count test's lengths (proofs.toploc)
        exceed_mean, exceed_rate = exceed_level(chunks, CALIBRATION_CONFIDENCE / len(noise.by_tokens)) \
            if counted else (None, 1.0)
        means = [m for m in means if m != MISSING_STAT] or [0.0]
        medians = [m for m in medians if m != MISSING_STAT] or [0.0]
        out.append(ChunkLimits(
            tokens=tokens, chunks=len(chunks),
            max_exp_mismatches=min(DEFAULT_TOPK, math.floor(tail_limit(mismatches, per_chunk_rate, 1.0))),
            max_mant_err_mean=max(FP32_THRESHOLDS.max_mant_err_mean, max(means) * margin,
                                  tail_limit(means, per_chunk_rate, 1 / DEFAULT_TOPK)),
            max_mant_err_median=max(max(medians) * margin, max(medians) + MEDIAN_SLACK,
                                    tail_limit(medians, per_chunk_rate, 0.5)),
            exceed_mean=exceed_mean, exceed_rate=exceed_rate))
    return out


def exceed_level(chunks: Sequence[tuple[int, float, float, str]], confidence: float) -> tuple[float, float]:
    """A chunk-length bucket's level for the file's chunk-count test (proofs.toploc.chunk_count_test): the
    highest 90 % quantile of the mantissa-error mean (its largest error left out) over the calibrated populations
    (dtype × batch size: a float32 worker's chunks would dilute a bf16 one's), and the largest upper bound, over
    the populations, on the rate of chunks above it (`tail_bound` at `confidence` split over them)."""
    by_population: dict[str, list[float]] = {}
    for _, mean, _, population in chunks:
        by_population.setdefault(population, []).append(mean)
    level = max(sorted(means)[int(0.9 * (len(means) - 1))] for means in by_population.values())
    rate = max(tail_bound(sum(m > level for m in means), len(means), confidence / len(by_population))
               for means in by_population.values())
    return level, rate


def file_chunks(spec: RunSpec, verification: VerificationSpec) -> int:
    """TOPLOC chunks of a full-length file's checked completions (⌈q·n⌉ completions of max_tokens)."""
    completions = spec.prompts_per_submission * spec.sampling.group_size
    return math.ceil(verification.spot_check_bps / MAX_BPS * completions) * n_chunks(spec.sampling.max_tokens,
                                                                                     DEFAULT_CHUNK)


def thresholds(noise: Noise, base: VerificationSpec, margin: float, margin_matches: int,
               chunks_per_file: int = 64) -> VerificationSpec:
    """The run spec's verification rules widened from the measured honest noise: the logit tolerance, and TOPLOC
    limits by chunk length (`toploc_limits`) at which an honest file of `chunks_per_file` chunks fails with
    probability at most base.false_positive_rate (a union bound over its chunks and their three statistics)."""
    floor = 1e-6  # a float32 worker on the reference's own kernels shows zero noise; keep a sliver of slack
    # The median moves in steps of half an ulp, and a calibration run's few chunks rarely see the bf16 chunk
    # whose median leaves 0 (3 % of honest bf16 chunks on the Qwen2-style fixture): a 0 × margin threshold
    # would reject it, so the median is allowed MEDIAN_SLACK past the worst honest chunk whatever the margin.
    # Single bf16 rounding flips are too rare for a calibration run to see reliably (~0.03 per chunk in
    # float32): the mean never goes below the float32 profile's allowance of three of them. The chunk's
    # largest error is left out of the mean (a top-k near-tie; proofs.toploc.Thresholds.mean_excludes_max).
    return base.model_copy(update={
        "toploc_min_exp_matches": max(0, noise.min_exp_matches - margin_matches),
        "toploc_max_mant_err_mean": max(FP32_THRESHOLDS.max_mant_err_mean, noise.max_mant_err_mean * margin),
        "toploc_mean_excludes_max": True,
        "toploc_max_mant_err_median": max(noise.max_mant_err_median * margin, noise.max_mant_err_median + MEDIAN_SLACK),
        "logit_tolerance": max(floor, noise.max_logit_diff * margin),
        "toploc_by_tokens": toploc_limits(noise, margin, base.false_positive_rate / (3 * chunks_per_file)),
    })


def margin_null(folder: Path, spec: RunSpec, samples: list[tuple[list[int], list[int], int, str]],
                logit_tolerance: float, seeds_per_position: int = 1, worker_backend: str = "torch",
                worker_device: str = "cpu", batch: int = 16) -> MarginNull:
    """The honest margin tails (proofs.margins) at the pool's tolerance: every honest context of `samples` (prompt,
    tokens, seed, worker dtype) is prefilled once by the validator (float32) and once by its worker, and at each
    position the tokens the worker's logits pick under `seeds_per_position` public seeds (the sample's own, then
    others derived from it) are replayed against the validator's logits (proofs.sampling.honest_margins): per level,
    how many of the honest margins exceed it, turned into upper bounds. Margins of one position under many seeds
    share its near-tie structure, so the bounds' confidence assumes those positions are typical of the pool's.

    Each worker dtype is its own population, and the null is the loosest of them level by level (each population's
    bounds at confidence 1 − CALIBRATION_CONFIDENCE / populations, so all hold together at the stated confidence):
    pooling a quiet population (float32 workers, whose margins are 0) with a noisy one would halve the noisy one's
    tails, and its honest workers would outgrow the null."""
    model, tokenizer = load_policy(folder)
    stops = stop_token_ids(model, tokenizer)
    reference = TorchBackend(model, eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
    levels = torch.tensor(MARGIN_LEVELS)
    s = spec.sampling
    dtypes = sorted({sample[3] for sample in samples})
    nulls = []
    for dtype in dtypes:
        worker = _worker(folder, dtype, worker_backend, stops, tokenizer.pad_token_id, worker_device)
        mine = [sample for sample in samples if sample[3] == dtype]
        exceed = torch.zeros(len(MARGIN_LEVELS), dtype=torch.int64)
        tokens = 0
        for start in range(0, len(mine), batch):
            pairs = [(prompt, ids) for prompt, ids, _, _ in mine[start : start + batch]]
            for (_, ids, seed, _), ref, own in zip(mine[start : start + batch], reference.prefill_batch(pairs),
                                                   worker.prefill_batch(pairs)):
                seeds = torch.tensor([(seed + k * SEED_STRIDE) % 2**SEED_BITS for k in range(seeds_per_position)])
                margins = honest_margins(ref.logits, own.logits, seeds, s.temperature, s.top_p, logit_tolerance)
                exceed += (margins.flatten()[:, None] > levels[None, :]).sum(0)
                tokens += margins.numel()
        nulls.append(MarginNull.fit(exceed.tolist(), tokens, confidence=CALIBRATION_CONFIDENCE / len(dtypes)))
    return MarginNull.loosest(nulls)


def stated_rates(spec: RunSpec, verification: VerificationSpec) -> dict:
    """The false-positive rates a run spec states, at its file size: checked tokens of a full-length file
    (prompts × G × max_tokens × q) and the margin sum at which the file test challenges it, those tokens in as few
    prompts as hold them (the highest threshold a draw of them meets: proofs.margin_power.packed_prompts)."""
    q = verification.spot_check_bps / MAX_BPS
    completions = spec.prompts_per_submission * spec.sampling.group_size
    tokens = math.ceil(q * completions) * spec.sampling.max_tokens
    threshold = verification.margin_null().threshold(packed_prompts(tokens, spec.prompt_tokens()),
                                                     verification.false_positive_rate / 2)
    return {"false_positive_rate": verification.false_positive_rate, "file_tokens": tokens,
            "file_chunks": file_chunks(spec, verification),
            "file_threshold": threshold, "worker_false_positive_rate": verification.worker_false_positive_rate}


def _toml(value) -> str:
    """A TOML value: inline tables for dicts (TOML has no null: a None entry is left out, its field's default),
    arrays for lists, JSON's spelling for the rest."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items() if v is not None) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def verification_table(verification: VerificationSpec) -> str:
    """The `[verification]` table of a run spec (and of `trainer start --policy-verification`'s file)."""
    return "[verification]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in verification.model_dump().items()
                                       if v is not None)


def _chunk_limits(verification: VerificationSpec) -> str:
    return "; ".join(f"chunks of <= {p.tokens} tokens, fitted on {p.chunks}: <= {p.max_exp_mismatches} exponent mismatches, "
                     f"mean <= {p.max_mant_err_mean:.3g}, median <= {p.max_mant_err_median:.3g}"
                     + ("" if p.exceed_mean is None else
                        f", counted above a mean of {p.exceed_mean:.3g} (honest rate <= {p.exceed_rate:.3g})")
                     for p in verification.toploc_by_tokens) or "none measured"


def _worker(folder: Path, dtype: str, backend: str, stops: tuple[int, ...], pad: int | None,
            device: str) -> InferenceBackend:
    if backend == "vllm":
        from inference.vllm_backend import VllmBackend

        return VllmBackend(str(folder), dtype=dtype)
    model, _ = load_policy(folder)
    return TorchBackend(model, compute_dtype=DTYPES[dtype], eos_token_id=stops, pad_token_id=pad, device=device)


def _csv(kind, text: str) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v]
    except ValueError:
        raise UsageError(f"{text!r} is not a comma-separated list of {kind.__name__}") from None
    if not values:
        raise UsageError("an empty list")
    return values


def run_calibrate(args: argparse.Namespace) -> int:
    if args.pool is not None:
        return _calibrate_pool(args)
    spec = load_run_spec(args.run_spec)
    _check_options(args)
    result, stated, header = calibrate(args, args.checkpoint, spec)
    table = verification_table(result)
    if args.out:
        args.out.write_text(header + table)
    if args.json:
        print(json.dumps({"measured": stated.pop("measured"), "verification": result.model_dump(), "stated": stated}))
    elif not args.out:
        print(header + table, end="")
    return 0


def _check_options(args: argparse.Namespace) -> None:
    dtypes = _csv(str, args.dtypes)
    unknown = sorted(set(dtypes) - set(DTYPES))
    if unknown:
        raise UsageError(f"unknown dtype(s) {unknown}; choose from {sorted(DTYPES)}")
    _csv(int, args.batch_sizes)
    if args.margin < 1 or args.false_positive_rate == 1:  # the options' types refuse the rest
        raise UsageError("--margin must be >= 1, --false-positive-rate in (0, 1)")
    try:
        args.worker_device = parse_device(args.worker_device, flag="--worker-device")
    except ComputeChoiceError as exc:
        raise UsageError(str(exc)) from None


def calibrate(args: argparse.Namespace, folder: Path, spec: RunSpec) -> tuple[VerificationSpec, dict, str]:
    """Measure `folder`'s checkpoint under `spec` as the options say: the `[verification]` rules, the rates they
    state (with the measurements under "measured"), and the comment lines that head the table."""
    dtypes = _csv(str, args.dtypes)
    torch.manual_seed(0)
    noise = measure(folder, spec, dtypes, _csv(int, args.batch_sizes), args.prompts, args.backend, args.worker_device)
    base = spec.verification.model_copy(update={"false_positive_rate": args.false_positive_rate})
    result = thresholds(noise, base, args.margin, args.margin_matches, file_chunks(spec, base))
    null = margin_null(folder, spec, noise.samples, result.logit_tolerance, args.seeds_per_position,
                       args.backend, args.worker_device)
    result = result.model_copy(update={"margin_levels": list(null.levels), "margin_tail": list(null.tail),
                                       "margin_tokens": null.tokens})
    stated = stated_rates(spec, result)
    engine = "vllm" if args.backend == "vllm" else f"torch on {args.worker_device}"
    header = (f"# validator calibrate: {folder.name}, workers {engine}, dtypes {dtypes}, "
              f"batch sizes {args.batch_sizes}, "
              f"{noise.chunks} honest chunks, margin x{args.margin} / -{args.margin_matches} matches\n"
              f"# margin test: tails from {null.tokens} honest tokens (confidence 1 - {CALIBRATION_CONFIDENCE:g}); "
              f"per-file false-positive rate <= {stated['false_positive_rate']:g} at {stated['file_tokens']} checked "
              f"tokens (challenged at a margin sum >= {stated['file_threshold']:.3g}); per worker <= "
              f"{stated['worker_false_positive_rate']:g} over all its files\n"
              f"# TOPLOC: limits by chunk length ({_chunk_limits(result)}) fitted for a per-file false-positive rate <= "
              f"{stated['false_positive_rate']:g} at {stated['file_chunks']} checked chunks\n")
    stated["measured"] = {k: v for k, v in vars(noise).items() if k not in ("samples", "by_tokens")}
    return result, stated, header


def _calibrate_pool(args: argparse.Namespace) -> int:
    """`--pool`: calibrate the pool's newest policy (once, or every `--every` policies), writing `--out`
    atomically with the step it measured."""
    if args.out is None:
        raise UsageError("--pool needs --out (the file `trainer start --policy-verification` reads)")
    if args.checkpoint is not None or args.run_spec is not None:
        raise UsageError("--pool takes the pool's newest policy and run spec: leave out --checkpoint and --run-spec")
    _check_options(args)
    if not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: folder {args.out.parent} does not exist")
    rpc_url, deployments = resolve_chain_args(args)
    kubo_api = args.kubo_api or (load_devnet_info(args.devnet_dir) or {}).get("kubo_api")
    if not kubo_api:
        raise UsageError("no --kubo-api given and no devnet is up")
    ledger = Ledger.open(rpc_url, deployments, logs_page_blocks=args.logs_page_blocks)
    with KuboClient(kubo_api) as kubo:
        spec = fetch_run_spec(kubo, pool_state(ledger, args.pool).task_ref)
        done: int | None = None
        cache = args.out.parent / f".calibrate-pool-{args.pool}"
        while True:
            step = pool_state(ledger, args.pool).latest_step
            if done is None or step >= done + args.every:
                fetched = fetch_checkpoint(kubo, bytes(ledger.pool.checkpoint_at(args.pool, step)), cache / str(step),
                                           provide=False)
                result, stated, header = calibrate(args, fetched.path, spec)
                # a reader (the trainer) sees the old table or the new one, never half of one
                atomic_write(args.out, (f"# pool {args.pool}, policy step {step}\n" + header +
                                        verification_table(result)).encode())
                shutil.rmtree(cache / str(step), ignore_errors=True)
                print(json.dumps({"pool": args.pool, "step": step, "logit_tolerance": result.logit_tolerance,
                                  "margin_tail": result.margin_tail, "out": str(args.out)}), flush=True)
                done = step
                if args.every == 0:
                    return 0
            time.sleep(POOL_POLL_S)


POOL_POLL_S = 5.0
"""How often `--pool --every K` asks the chain for a newer policy."""
