"""One-call verification of submitted completions (the validator's inner loop).

Checks, cheapest first; the prefill runs only when the structural checks pass:
  tokens       a non-empty prompt and every token id inside the model's vocabulary
  prompt       the completion answers the prompt the validator assigned (token ids equal)
  seed         the sampling seed is the one derived for (pool, worker, step, sample index)
  termination  EOS only at the end; "length" means exactly max_tokens; p(EOS) at least the pool's
               floor (off by default: proofs/termination.py says why)
  sampling     every token replays under the seeded Gumbel rule from recomputed logits (the hard per-token
               bound), and each token's margin (proofs.margins) is reported; `margin_test` tests a file's
               margins against the pool's calibrated null
  toploc       the proofs match the recomputed hidden states (per-chunk statistics)
Each check reports its measured statistics so a challenge can carry them as evidence.
With `spot_check` (protocol.spotcheck), only the chosen completions are prefilled: the others
get the structural checks (tokens, prompt, seed, EOS placement) and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from inference.backend import InferenceBackend, Prefill
from proofs.margins import MarginNull, MarginTest, margin_test
from proofs.sampling import ReplayResult, replay_batch
from proofs.termination import DEFAULT_MIN_EOS_PROB, check_termination
from proofs.toploc import (
    DEFAULT_CHUNK,
    DEFAULT_TOPK,
    PAPER_THRESHOLDS,
    ChunkCountTest,
    ChunkResult,
    ProofFormatError,
    Thresholds,
    chunk_count_test,
    chunk_key,
    count_evidence,
    failing_chunks,
    verify_proofs_batch,
)
from protocol.runspec import SamplingSpec

CheckName = Literal["tokens", "prompt", "seed", "termination", "sampling", "toploc"]

DEFAULT_LOGIT_TOLERANCE = 1e-3
"""eps of the replay rule, in logit units. Measured honest worker/validator logit differences
on CPU float32 compute are ~1e-5 (docs/notes/toploc.md); pools with bf16 or
cross-hardware workers must raise it to their measured noise."""

FP32_THRESHOLDS = Thresholds(min_exp_matches=125, max_mant_err_mean=0.03, max_mant_err_median=0.0,
                             mean_excludes_max=True)
"""TOPLOC thresholds for pools whose reference computation is float32 (the CPU torch backend).

In 4392 honest chunk comparisons across batch sizes, padding sides, thread counts and chunked
prefill not one top-k value differed: float32 noise (~1e-6 relative) flips a bf16 rounding only
for values within that distance of a rounding boundary, ~0.03 expected flips per 128 points.
These thresholds allow 3 exponent flips and 3 single-unit mantissa flips per chunk (Poisson(0.03):
P(>= 4) ~ 3e-8), besides the one random point a top-k near-tie can put in a chunk (left out of the
mean: `mean_excludes_max`; a demo run met it once in ~29k honest chunks, mean 0.094 with it). fp16
compute in place of float32 shows 5–15 flips per chunk. The paper's
thresholds, sized for bf16 GPU kernels on large models, let small tampering through on a tiny
model. Measurements: docs/notes/toploc.md."""

DEFAULT_MAX_BATCH_TOKENS = 1024
"""Padded positions (prompt + completion) prefilled at once: the float32 logits held at any moment are
at most max_batch_tokens × V × 4 bytes (594 MiB at V = 152,064), whatever the file's size."""


class VerifyConfig(BaseModel):
    """The pool's verification parameters."""

    model_config = ConfigDict(frozen=True)

    sampling: SamplingSpec
    thresholds: Thresholds = PAPER_THRESHOLDS
    logit_tolerance: float = Field(DEFAULT_LOGIT_TOLERANCE, ge=0)
    min_eos_prob: float = Field(DEFAULT_MIN_EOS_PROB, ge=0, le=1)
    chunk: int = Field(DEFAULT_CHUNK, ge=1)
    topk: int = Field(DEFAULT_TOPK, ge=1)
    margin_null: MarginNull | None = None
    """The honest margin distribution (protocol.runspec.VerificationSpec.margin_null); None: no margin test."""
    false_positive_rate: float = Field(1e-6, gt=0, lt=1)
    """The margin test's per-file false-positive rate."""
    max_batch_tokens: int = Field(DEFAULT_MAX_BATCH_TOKENS, ge=1)
    """The validator's own memory bound, not a pool rule (it moves recomputed values by float noise only):
    completions are prefilled and checked in batches of at most this many padded positions (one completion
    longer than that is a batch of its own)."""


class CompletionRecord(BaseModel):
    """What a worker submits for one completion (as read from its rollout file)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    proofs: list[bytes]
    seed: int
    finish_reason: str


class CheckResult(BaseModel):
    """One check's verdict and the statistics it measured."""

    name: CheckName
    passed: bool
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class Verdict(BaseModel):
    """All checks run on one completion; `model_dump()` is the evidence JSON."""

    checks: list[CheckResult]
    prefilled: bool = False
    """Whether the prefill checks (termination's EOS probability, sampling, TOPLOC) ran."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> list[CheckName]:
        return [c.name for c in self.checks if not c.passed]

    def check(self, name: CheckName) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)


def _structural_checks(
    record: CompletionRecord,
    config: VerifyConfig,
    backend: InferenceBackend,
    expected_prompt: Sequence[int] | None,
    expected_seed: int | None,
) -> list[CheckResult]:
    eos_token_ids = backend.eos_token_ids
    ids = record.prompt_ids + record.completion_ids
    in_vocab = bool(record.prompt_ids) and min(ids) >= 0 and max(ids) < backend.vocab_size
    checks = [CheckResult(
        name="tokens", passed=in_vocab,
        reason="" if in_vocab else "empty prompt or token ids outside the vocabulary",
    )]
    if expected_prompt is not None:
        same = list(expected_prompt) == record.prompt_ids
        checks.append(CheckResult(
            name="prompt", passed=same, reason="" if same else "prompt is not the assigned one",
        ))
    if expected_seed is not None:
        same = expected_seed == record.seed
        checks.append(CheckResult(
            name="seed", passed=same,
            reason="" if same else f"seed {record.seed} is not the derived seed {expected_seed}",
        ))
    if record.finish_reason != "eos":
        term = check_termination(
            record.completion_ids, record.finish_reason, config.sampling.max_tokens, eos_token_ids
        )
        checks.append(CheckResult(name="termination", passed=term.passed, reason=term.reason))
    elif not record.completion_ids or record.completion_ids[-1] not in eos_token_ids:
        checks.append(CheckResult(
            name="termination", passed=False, reason="finish_reason eos but no final EOS",
        ))
    return checks


def verify_completions(
    backend: InferenceBackend,
    records: Sequence[CompletionRecord],
    config: VerifyConfig,
    expected_prompts: Sequence[Sequence[int] | None] | None = None,
    expected_seeds: Sequence[int | None] | None = None,
    spot_check: Collection[int] | None = None,
) -> list[Verdict]:
    """Verify many completions, prefilled in batches of `config.max_batch_tokens` positions; one Verdict
    per record.

    `expected_prompts` / `expected_seeds` (per record, from the assignment PRF and
    proofs.sampling.derive_seed) enable the prompt and seed checks. `spot_check` (indices into
    `records`; None = all) limits the prefill and the checks that need it to those records.
    """
    n = len(records)
    prompts = list(expected_prompts) if expected_prompts is not None else [None] * n
    seeds = list(expected_seeds) if expected_seeds is not None else [None] * n
    if len(prompts) != n or len(seeds) != n:
        raise ValueError("expected_prompts and expected_seeds need one entry per record")
    early = [
        _structural_checks(r, config, backend, p, s) for r, p, s in zip(records, prompts, seeds)
    ]
    chosen = set(range(n)) if spot_check is None else set(spot_check)
    todo = [i for i in range(n) if i in chosen and all(c.passed for c in early[i])]
    verdicts = [Verdict(checks=checks) for checks in early]
    for batch in _prefill_batches(records, todo, config.max_batch_tokens):
        _check_batch(backend, records, early, verdicts, batch, config)
    return verdicts


def _prefill_batches(records: Sequence[CompletionRecord], todo: list[int], max_tokens: int) -> list[list[int]]:
    """`todo` in batches of at most `max_tokens` padded positions (batch × its longest sequence),
    shortest sequences first so that little of a batch is padding; a longer sequence is a batch alone."""
    def length(i: int) -> int:  # the prefilled sequence: prompt + completion[:-1]
        return len(records[i].prompt_ids) + max(len(records[i].completion_ids) - 1, 0)

    batches: list[list[int]] = []
    width = 0
    for i in sorted(todo, key=length):
        if batches and (len(batches[-1]) + 1) * max(width, length(i)) <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
        width = length(i)  # sorted: the longest so far
    return batches


def _check_batch(backend: InferenceBackend, records: Sequence[CompletionRecord], early: list[list[CheckResult]],
                 verdicts: list[Verdict], batch: list[int], config: VerifyConfig) -> None:
    """Prefill one batch and run the prefill checks of its completions into `verdicts`; the batch's
    logits are dropped on return, before the next batch is prefilled."""
    prefills = backend.prefill_batch([(records[i].prompt_ids, records[i].completion_ids) for i in batch])
    params = config.sampling
    replays = replay_batch([p.logits for p in prefills], [records[i].completion_ids for i in batch],
                           [records[i].seed for i in batch], params.temperature, params.top_p, config.logit_tolerance)
    toplocs = verify_proofs_batch([p.hidden for p in prefills], [records[i].proofs for i in batch], config.chunk,
                                  config.topk)
    for i, prefill, replayed, toploc in zip(batch, prefills, replays, toplocs, strict=True):
        verdicts[i] = Verdict(checks=_prefill_checks(records[i], early[i], prefill, backend.eos_token_ids, config,
                                                     replayed, toploc), prefilled=True)


def _prefill_checks(record: CompletionRecord, early: list[CheckResult], prefill: Prefill, eos: tuple[int, ...],
                    config: VerifyConfig, replayed: ReplayResult,
                    toploc: list[ChunkResult] | ProofFormatError) -> list[CheckResult]:
    """The structural checks `early`, then those that need the prefill: termination's EOS probability, and the
    batch's sampling replay and TOPLOC comparison of this completion (`replayed`, `toploc`) as checks."""
    params = config.sampling
    checks = list(early)
    if record.finish_reason == "eos":
        term = check_termination(
            record.completion_ids, record.finish_reason, params.max_tokens, eos,
            last_logits=prefill.logits[-1], temperature=params.temperature,
            min_eos_prob=config.min_eos_prob,
        )
        checks = [c for c in checks if c.name != "termination"]
        checks.append(CheckResult(
            name="termination", passed=term.passed, reason=term.reason,
            details={"eos_prob": term.eos_prob},
        ))
    checks.append(CheckResult(
        name="sampling", passed=replayed.passed,
        reason="" if replayed.passed else
        f"{len(replayed.failed_positions)} of {replayed.n_tokens} tokens do not replay",
        details={
            "failed_positions": replayed.failed_positions[:64],
            "max_score_gap": replayed.max_score_gap,
            "logit_tolerance": config.logit_tolerance,
            "tokens": replayed.n_tokens,
            "margin_sum": replayed.margin_sum,
            "margin_score": replayed.margin_sum if config.margin_null is None else
            config.margin_null.score(replayed.margins),
            "max_margin": max(replayed.margins, default=0.0),
        },
    ))
    checks.append(_toploc_check(toploc, config, lambda i: chunk_key(record.prompt_ids, record.completion_ids, i,
                                                                     config.chunk)))
    return checks


def _toploc_check(results: list[ChunkResult] | ProofFormatError, config: VerifyConfig,
                  key_of: Callable[[int], str] | None = None) -> CheckResult:
    if isinstance(results, ProofFormatError):
        return CheckResult(name="toploc", passed=False, reason=f"malformed proofs: {results}")
    bad = failing_chunks(results, config.thresholds)
    return CheckResult(
        name="toploc", passed=not bad,
        reason="" if not bad else f"{len(bad)} of {len(results)} chunks outside thresholds",
        details={
            "failing_chunks": bad,
            "exp_mismatches": [r.exp_mismatches for r in results],
            "mant_err_mean": [r.mant_err_mean for r in results],
            "mant_err_median": [r.mant_err_median for r in results],
            "chunk_tokens": [r.n_tokens for r in results],
            "count_evidence": count_evidence(results, config.thresholds, key_of),
            "thresholds": config.thresholds.model_dump(),
        },
    )


def file_margin_test(verdicts: Sequence[Verdict], prompts: Sequence[Hashable],
                     config: VerifyConfig) -> MarginTest | None:
    """The margin test (proofs.margins.margin_test) of the completions whose sampling replay ran, on their margins
    rounded up to the null's levels (`MarginNull.score`), as one file whose completion i answers `prompts[i]` (any
    key; the prompt's token ids serve) (its `worst_completion` an index into `verdicts`); None when the pool
    states no null or nothing was replayed."""
    if len(prompts) != len(verdicts):
        raise ValueError(f"one prompt per verdict: {len(prompts)} for {len(verdicts)}")
    replayed = {i: c for i, v in enumerate(verdicts)
                if (c := v.check("sampling")) is not None and "margin_score" in c.details}
    if config.margin_null is None or not replayed:
        return None
    test = margin_test([(c.details["tokens"], c.details["margin_score"]) for c in replayed.values()],
                       [prompts[i] for i in replayed], config.margin_null, config.false_positive_rate)
    worst = None if test.worst_completion is None else list(replayed)[test.worst_completion]
    return test.model_copy(update={"worst_completion": worst})


def file_chunk_count_test(verdicts: Sequence[Verdict], config: VerifyConfig) -> ChunkCountTest | None:
    """The TOPLOC chunk-count test (proofs.toploc.chunk_count_test) of the chunks of every completion whose proofs
    were compared, as one file; None where no chunk length has a calibrated level."""
    counted = [tuple(pair) for v in verdicts if (c := v.check("toploc")) is not None
               for pair in c.details.get("count_evidence", [])]
    return chunk_count_test(counted, config.false_positive_rate)


def verify_completion(
    backend: InferenceBackend,
    record: CompletionRecord,
    config: VerifyConfig,
    expected_prompt: Sequence[int] | None = None,
    expected_seed: int | None = None,
) -> Verdict:
    """Verify one completion (see verify_completions)."""
    return verify_completions(
        backend, [record], config, [expected_prompt], [expected_seed]
    )[0]
