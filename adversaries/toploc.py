"""The TOPLOC attack & honesty suite: adversarial workers that each build submissions with the real
libraries and one dishonest change (other weights, other compute precision, altered tokens, truncation,
copied or corrupted proofs, own seeds, unassigned prompts), honest runs under every benign variation, and
the judge that runs the validator's checks on both. Used by tests/integration/test_toploc_attacks.py and bench.toploc.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
from transformers import LlamaForCausalLM

from adversaries import models
from adversaries.completions import chosen_seeds, with_proofs_of
from inference.backend import Completion
from inference.tiny import BOS_ID, EOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from inference.verify import FP32_THRESHOLDS, CompletionRecord, VerifyConfig, verify_completions
from proofs.assignment import assign_prompts
from proofs.sampling import derive_seed
from proofs.toploc import PAPER_THRESHOLDS, Thresholds, build_proofs
from protocol.runspec import SamplingSpec

POOL_SEED = b"proofswarm-bench-pool"
WORKER = "0x" + "5a" * 20
STEP = 3
DATASET = [
    f"Q{i}: what is {3 + 7 * i % 90} {'+-*'[i % 3]} {2 + 5 * i % 40}? Answer with a number."
    for i in range(32)
]


@dataclass(frozen=True)
class SuiteSetup:
    """Model shape, pool parameters and how many prompts each scenario submits."""

    hidden: int = 128
    layers: int = 4
    n_prompts: int = 4
    params: SamplingSpec = SamplingSpec(temperature=1.0, top_p=1.0, max_tokens=64)
    thresholds: Thresholds = FP32_THRESHOLDS
    logit_tolerance: float = 1e-3

    def __post_init__(self) -> None:
        if 2 * self.n_prompts > len(DATASET):
            raise ValueError(f"n_prompts must be at most {len(DATASET) // 2}")

    @property
    def vocab(self) -> int:
        return len(build_char_tokenizer())

    def policy(self, seed: int = 0) -> LlamaForCausalLM:
        """The pool's bf16 policy (seed 0) or another model of the same shape."""
        return build_tiny_llama(
            self.vocab, seed, hidden=self.hidden, layers=self.layers, dtype=torch.bfloat16,
            lm_head_std=2.0 / self.hidden**0.5,
        )

    def assigned(self) -> list[list[int]]:
        tokenizer = build_char_tokenizer()
        indices = assign_prompts(POOL_SEED, WORKER, 0, len(DATASET), self.n_prompts)
        return [[BOS_ID, *tokenizer.encode(DATASET[i])] for i in indices]

    def unassigned(self) -> list[list[int]]:
        tokenizer = build_char_tokenizer()
        taken = set(assign_prompts(POOL_SEED, WORKER, 0, len(DATASET), self.n_prompts))
        free = [i for i in range(len(DATASET)) if i not in taken][: self.n_prompts]
        return [[BOS_ID, *tokenizer.encode(DATASET[i])] for i in free]

    def seeds(self) -> list[int]:
        return [derive_seed(POOL_SEED, WORKER, bytes(32), j) for j in range(self.n_prompts)]

    def verify_config(self) -> VerifyConfig:
        return VerifyConfig(
            sampling=self.params, thresholds=self.thresholds, logit_tolerance=self.logit_tolerance
        )


@contextmanager
def _threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _records(prompts: list[list[int]], completions: list[Completion]) -> list[CompletionRecord]:
    return [
        CompletionRecord(
            prompt_ids=p, completion_ids=c.token_ids, proofs=build_proofs(c.hidden), seed=c.seed,
            finish_reason=c.finish_reason,
        )
        for p, c in zip(prompts, completions)
    ]


def run_worker(
    setup: SuiteSetup,
    model: LlamaForCausalLM | None = None,
    prompts: list[list[int]] | None = None,
    params: SamplingSpec | None = None,
    compute_dtype: torch.dtype = torch.float32,
    batch_size: int | None = None,
    threads: int = 1,
) -> tuple[list[list[int]], list[CompletionRecord]]:
    """Generate with proofs like the worker does; returns (prompts used, records)."""
    model = model if model is not None else setup.policy()
    prompts = prompts if prompts is not None else setup.assigned()
    backend = TorchBackend(model, compute_dtype=compute_dtype)
    seeds = setup.seeds()
    step = batch_size or len(prompts)
    completions: list[Completion] = []
    with _threads(threads):
        for start in range(0, len(prompts), step):
            completions += backend.generate(
                prompts[start : start + step], params or setup.params, seeds[start : start + step]
            )
    return prompts, _records(prompts, completions)


# ---- adversaries ----------------------------------------------------------------------------


def _claim_assigned(setup: SuiteSetup, records: list[CompletionRecord]) -> list[CompletionRecord]:
    return [r.model_copy(update={"prompt_ids": p}) for r, p in zip(records, setup.assigned())]


def _alter_prompt_token(setup: SuiteSetup) -> list[CompletionRecord]:
    altered = [list(p) for p in setup.assigned()]
    for p in altered:
        p[len(p) // 2] = p[len(p) // 2] + 1 if p[len(p) // 2] + 1 < setup.vocab else 4
    return _claim_assigned(setup, run_worker(setup, prompts=altered)[1])


def _alter_completion_token(setup: SuiteSetup) -> list[CompletionRecord]:
    records = run_worker(setup)[1]
    out = []
    for r in records:
        ids = list(r.completion_ids)
        i = len(ids) // 2
        ids[i] = ids[i] + 1 if ids[i] + 5 < setup.vocab else 5
        out.append(r.model_copy(update={"completion_ids": ids}))
    return out


def _truncate(setup: SuiteSetup, fake_eos: bool) -> list[CompletionRecord]:
    records = run_worker(setup)[1]
    out = []
    for r in records:
        keep = r.completion_ids[: max(1, len(r.completion_ids) // 2)]
        if keep[-1] == EOS_ID:
            keep = keep[:-1] or [5]
        if fake_eos:
            keep = keep + [EOS_ID]
        out.append(r.model_copy(update={
            "completion_ids": keep, "finish_reason": "eos" if fake_eos else "length",
            "proofs": r.proofs[: -(-len(keep) // 32)],
        }))
    return out


def _copy_proofs(setup: SuiteSetup) -> list[CompletionRecord]:
    return with_proofs_of(run_worker(setup)[1], run_worker(setup, prompts=setup.unassigned())[1])


def _corrupt_proofs(setup: SuiteSetup) -> list[CompletionRecord]:
    out = []
    for r in run_worker(setup)[1]:
        proof = bytearray(r.proofs[0])
        proof[101] ^= 0x10
        out.append(r.model_copy(update={"proofs": [bytes(proof), *r.proofs[1:]]}))
    return out


def _own_seeds(setup: SuiteSetup) -> list[CompletionRecord]:
    """Samples with seeds of its choosing (e.g. to fish for lucky completions)."""
    prompts = setup.assigned()
    backend = TorchBackend(setup.policy())
    completions = backend.generate(prompts, setup.params, chosen_seeds(len(prompts)))
    return _records(prompts, completions)


def attacks(setup: SuiteSetup) -> dict[str, Callable[[], list[CompletionRecord]]]:
    """Every attack of the suite: name -> function building the dishonest submission."""
    p = setup.params
    table: dict[str, Callable[[], list[CompletionRecord]]] = {
        "weights from another seed": lambda: run_worker(setup, model=setup.policy(seed=1))[1],
    }
    for layer in range(setup.layers):
        table[f"layer {layer} perturbed by 1%"] = (
            lambda layer=layer: run_worker(setup, model=models.perturbed_layer(setup.policy(), layer))[1]
        )
    table.update({
        "lower precision: bf16 compute": lambda: run_worker(setup, compute_dtype=torch.bfloat16)[1],
        "lower precision: fp16 compute": lambda: run_worker(setup, compute_dtype=torch.float16)[1],
        "lower precision: int8 weights": lambda: run_worker(setup, model=models.quantised(setup.policy()))[1],
        "one prompt token altered": lambda: _alter_prompt_token(setup),
        "one completion token altered": lambda: _alter_completion_token(setup),
        "completion truncated": lambda: _truncate(setup, fake_eos=False),
        "completion truncated + EOS": lambda: _truncate(setup, fake_eos=True),
        "greedy instead of sampling": lambda: run_worker(
            setup, params=p.model_copy(update={"temperature": 0.0}))[1],
        "sampling at temperature 0.7": lambda: run_worker(
            setup, params=p.model_copy(update={"temperature": 0.7}))[1],
        "proof copied from another completion": lambda: _copy_proofs(setup),
        "proof bytes corrupted": lambda: _corrupt_proofs(setup),
        "prompt not the assigned one": lambda: run_worker(setup, prompts=setup.unassigned())[1],
        "seed not the derived one": lambda: _own_seeds(setup),
    })
    return table


@dataclass(frozen=True)
class HonestRun:
    batch_size: int
    threads: int
    padding_side: Literal["left", "right"]
    prefill_chunk: int | None

    @property
    def name(self) -> str:
        chunk = (
            f"chunked prefill {self.prefill_chunk}" if self.prefill_chunk else "one-pass prefill"
        )
        return (f"honest: batch {self.batch_size}, {self.threads} thread(s), "
                f"{self.padding_side}-padded, {chunk}")


def honest_runs(setup: SuiteSetup) -> list[HonestRun]:
    return [
        HonestRun(batch, threads, side, chunk)
        for batch in (1, setup.n_prompts)
        for threads in (1, 2)
        for side, chunk in (("right", None), ("left", 8))
    ]


# ---- running the suite ----------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    honest: bool
    completions: int
    rejected: int
    failed_checks: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    max_replay_gap: float = 0.0
    """Largest sampling-replay score gap seen (honest runs: the measured numerical noise)."""
    identical: int = 0
    """Dishonest completions that came out byte-identical to the honest submission (e.g. an
    immediate EOS sampled at another temperature). No check can or needs to tell them apart;
    they are reported and left out of the detection count."""

    @property
    def tampered(self) -> int:
        return self.completions - self.identical

    @property
    def correct(self) -> bool:
        return self.rejected == 0 if self.honest else self.rejected >= self.tampered


def _judge(
    setup: SuiteSetup, validator: TorchBackend, records: list[CompletionRecord],
    thresholds: Thresholds, name: str, honest: bool,
) -> Outcome:
    config = setup.verify_config().model_copy(update={"thresholds": thresholds})
    verdicts = verify_completions(
        validator, records, config, expected_prompts=setup.assigned(),
        expected_seeds=setup.seeds(),
    )
    failed: dict[str, int] = {}
    gaps = [0.0]
    for v in verdicts:
        for check in v.failed:
            failed[check] = failed.get(check, 0) + 1
        sampling = v.check("sampling")
        if sampling is not None:
            gaps.append(sampling.details["max_score_gap"])
    return Outcome(
        name, honest, len(records), sum(not v.passed for v in verdicts), failed,
        tokens=sum(len(r.completion_ids) for r in records), max_replay_gap=max(gaps),
    )


def run_suite(
    setup: SuiteSetup, thresholds: list[Thresholds] | None = None
) -> dict[str, list[Outcome]]:
    """Run every honest and dishonest scenario; outcomes per threshold profile name."""
    profiles = thresholds or [setup.thresholds]
    results: dict[str, list[Outcome]] = {_profile_name(t): [] for t in profiles}
    validators = {
        (side, chunk): TorchBackend(
            setup.policy(), prefill_padding_side=side, prefill_chunk_size=chunk
        )
        for side, chunk in {(r.padding_side, r.prefill_chunk) for r in honest_runs(setup)}
    }
    default_validator = validators[("right", None)]
    generated: dict[tuple[int, int], list[CompletionRecord]] = {}
    for run in honest_runs(setup):
        key = (run.batch_size, run.threads)
        if key not in generated:
            generated[key] = run_worker(setup, batch_size=run.batch_size, threads=run.threads)[1]
        records = generated[key]
        for t in profiles:
            validator = validators[(run.padding_side, run.prefill_chunk)]
            results[_profile_name(t)].append(_judge(setup, validator, records, t, run.name, True))
    reference = generated[(setup.n_prompts, 1)]
    for name, build in attacks(setup).items():
        records = build()
        identical = sum(r == h for r, h in zip(records, reference))
        for t in profiles:
            outcome = _judge(setup, default_validator, records, t, name, False)
            outcome.identical = identical
            results[_profile_name(t)].append(outcome)
    return results


def _profile_name(t: Thresholds) -> str:
    if t == PAPER_THRESHOLDS:
        return "paper"
    if t == FP32_THRESHOLDS:
        return "fp32"
    return "custom"


def confusion(outcomes: list[Outcome]) -> dict[str, int]:
    """Completion-level confusion counts (positive = dishonest)."""
    return {
        "true_positive": sum(o.rejected for o in outcomes if not o.honest),
        "false_negative": sum(max(0, o.tampered - o.rejected) for o in outcomes if not o.honest),
        "identical_to_honest": sum(o.identical for o in outcomes if not o.honest),
        "false_positive": sum(o.rejected for o in outcomes if o.honest),
        "true_negative": sum(o.completions - o.rejected for o in outcomes if o.honest),
    }


def format_suite(outcomes: list[Outcome], title: str) -> str:
    """Per-scenario table and the confusion matrix, as text."""
    lines = [title, f"{'scenario':<62} {'rejected':>9}  failed checks"]
    for o in outcomes:
        mark = "ok " if o.correct else "BAD"
        checks = ", ".join(f"{k}:{v}" for k, v in sorted(o.failed_checks.items())) or "-"
        if o.identical:
            checks += f"  ({o.identical} identical to the honest output)"
        lines.append(f"{mark} {o.name:<58} {o.rejected:>4}/{o.tampered:<4}  {checks}")
    c = confusion(outcomes)
    lines += [
        "confusion matrix (completions)   verdict: reject   verdict: accept",
        f"  dishonest                        {c['true_positive']:>15}   {c['false_negative']:>15}",
        f"  honest                           {c['false_positive']:>15}   {c['true_negative']:>15}",
        f"  ({c['identical_to_honest']} dishonest completions were byte-identical to the honest "
        "ones and are not counted)",
    ]
    return "\n".join(lines)
