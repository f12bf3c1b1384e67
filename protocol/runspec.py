"""The run spec: what every participant of a pool must agree on, content-addressed on IPFS.

A pool's on-chain `taskRef` is the digest of its run spec (a raw IPFS object, see
`ledger_client.ipfs.content`), so workers, validators and the trainer fetch the same spec from the
chain alone and nobody can quietly change the task, the sampling or the verification rules.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from proofs.counter import MAX_POSITION
from proofs.margins import MARGIN_LEVELS, MISCALIBRATION, SPREAD_SHAPE, MarginNull
from proofs.margin_power import bias_power, packed_prompts, tokens_for_power
from proofs.toploc_thresholds import COUNTED_FROM_TOKENS, ChunkLimits, Thresholds
from protocol.manifest import PolicyVerification
from tasks.base import Task, TaskError
from tasks.difficulty import register_subset
from tasks.registry import TaskSpec, build_task

POSITION_LIMIT = MAX_POSITION + 1
"""Every token position is below 2^32 (docs/protocol.md R5.1, R6.3): one word of the sampling rule's Philox counter
(its index in the completion) and of exact mode's RoPE turns (its index in prompt + completion, R5.6)."""


class SamplingSpec(BaseModel):
    """How completions are sampled: the one declaration of these values. The pool's run spec fixes them for
    workers, validators and the trainer alike; inference backends take the same object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_size: int = Field(16, ge=1, description="completions per prompt (G)")
    temperature: float = Field(1.0, ge=0, description="softmax temperature; 0 = greedy (evaluation only)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling mass")
    max_tokens: int = Field(16, ge=1, le=POSITION_LIMIT, description="completion token limit (positions below "
                            "2^32: the sampling rule's counter word)")


DEFAULT_MARGIN_TAIL = (1.66e-5,) * 6
"""Margin tails of a pool that did not calibrate: the float32 profile as `validator calibrate` measures it
(validator.calibrate.margin_null on the Qwen2-style fixture, V = 2,048: float32 workers at batch 8 against the float32
validator at logit_tolerance 1e-3, 64 prompts x 16 tokens x 512 public seeds = 524,288 honest margins, none above 0;
the upper bound at confidence 1 - 1e-3 over the six levels). Honest float32 workers on the reference's kernels emit
the validator's own argmax: every other population calibrates its own."""
DEFAULT_MARGIN_TOKENS = 524_288


class VerificationSpec(BaseModel):
    """Tolerances of the validator's checks (see inference.verify). The TOPLOC defaults are the
    paper's (bf16 GPU kernels); pools whose reference computation is float32 on CPU use tighter
    ones (inference.verify.FP32_THRESHOLDS), which a tiny model needs to catch small tampering."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    toploc_min_exp_matches: int = Field(90, ge=0)
    toploc_max_mant_err_mean: float = Field(10.0, ge=0)
    toploc_max_mant_err_median: float = Field(8.0, ge=0)
    toploc_mean_excludes_max: bool = Field(False, description="proofs.toploc.Thresholds.mean_excludes_max")
    toploc_by_tokens: list[ChunkLimits] = Field([], description=(
        "TOPLOC chunk limits by chunk length, fitted by `validator calibrate` on honest chunks for the stated per-file "
        "false-positive rate (proofs.toploc_thresholds.ChunkLimits); a chunk they cover is judged by them alone"))
    logit_tolerance: float = Field(1e-3, ge=0)
    min_eos_prob: float = Field(0.0, ge=0, le=1, description=(
        "a floor on p(EOS) where a completion ends; 0 (off) by default: the sampling replay already checks that "
        "the EOS was the seeded draw, and a floor ε rejects honest completions (up to ε per token)"))
    reward_tolerance: float = Field(0.0, ge=0, description=(
        "deprecated and unused: rewards are exact float32 values every party computes bit-identically, and the "
        "reward check is tasks.rewards.rewards_equal (no tolerance; the validator ignores this field). Kept so that "
        "run specs naming it still parse"))
    spot_check_bps: int = Field(10_000, gt=0, le=10_000, description=(
        "q in basis points: the fraction of each file's completions given the expensive checks "
        "(protocol.spotcheck); `pool create` makes it the pool's on-chain spotCheckBps, which is what "
        "validators apply"))
    min_checked_tokens: int = Field(0, ge=0, lt=2**32, description=(
        "a floor of checked tokens a file: the spot check draws further completions, in its own order, until the "
        "drawn ones hold this many tokens (protocol.spotcheck); 0 = no floor. The margin test's power against a "
        "small logit bias grows with the tokens it sees (docs/protocol.md R8.6)"))
    min_power: float = Field(0.0, ge=0, lt=1, description=(
        "the per-file power the floor of checked tokens must give the margin test against a logit bias of 1.9ε "
        "(proofs.margin_power, from this spec's own null, tolerance and temperature); `pool create` refuses a "
        "floor that falls short, and prints the power at the floor whenever a floor or a power is set; 0 = no "
        "requirement (docs/protocol.md R8.6)"))
    min_toploc_tokens: int = Field(0, ge=0, lt=2**32, description=(
        "the least sampling.max_tokens the spec accepts, so that TOPLOC's chunk count sees chunks (it counts chunks "
        f"of at least {COUNTED_FROM_TOKENS} tokens); 0 = no minimum, else at least {COUNTED_FROM_TOKENS} "
        "(docs/protocol.md R6.25)"))

    false_positive_rate: float = Field(1e-6, gt=0, lt=1, description=(
        "the statistical tests' per-file false-positive rate: an honest file of the calibrated population is "
        "challenged by the margin test with probability at most this (proofs.margins)"))
    worker_false_positive_rate: float = Field(1e-6, gt=0, lt=1, description=(
        "the per-worker accumulated margin test's rate: an honest worker is ever challenged by it, over all its "
        "files, with probability at most this"))
    margin_levels: list[float] = Field(list(MARGIN_LEVELS), description="proofs.margins.MarginNull.levels")
    margin_tail: list[float] = Field(list(DEFAULT_MARGIN_TAIL), description=(
        "upper bounds on an honest token's P(margin > level) per level (`validator calibrate` measures them)"))
    margin_tokens: int = Field(DEFAULT_MARGIN_TOKENS, ge=0, description="honest tokens the margin tails were measured on")
    spread_shape: float = Field(SPREAD_SHAPE, gt=0, allow_inf_nan=False, description=(
        "k, the honest spread the margin tests allow: a prompt's honest flip rates may be the tails times "
        "miscalibration times G ~ Gamma(k, mean 1), one G a prompt in the per-file test, one a file in the "
        "per-worker one (proofs.margins.MarginNull.spread_shape); smaller is more spread, so slower tests; any "
        "finite k > 0 (docs/protocol.md R6.18)"))
    miscalibration: float = Field(MISCALIBRATION, ge=1, allow_inf_nan=False, description=(
        "c: the honest population may run at up to c times the calibrated margin tails (a policy drifted since "
        "calibration; proofs.margins.MarginNull.miscalibration); at least 1, and c times the last level's tail "
        "below 1, past which neither margin test can ever challenge (docs/protocol.md R6.18)"))

    @model_validator(mode="after")
    def _toploc_minimum(self) -> VerificationSpec:
        if 0 < self.min_toploc_tokens < COUNTED_FROM_TOKENS:
            raise ValueError(f"verification.min_toploc_tokens {self.min_toploc_tokens} is below "
                             f"{COUNTED_FROM_TOKENS}, the shortest chunk TOPLOC's chunk count counts: use 0 or at "
                             f"least {COUNTED_FROM_TOKENS}")
        return self

    @model_validator(mode="after")
    def _a_spread_the_worker_test_can_see_past(self) -> VerificationSpec:
        problem = self.miscalibration_problem(self.margin_tail[-1] if self.margin_tail else 0.0)
        if problem:
            raise ValueError(problem)
        return self

    def miscalibration_problem(self, top_tail: float) -> str | None:
        """Why `miscalibration` leaves the margin tests nothing to find under margin tails whose last level's is
        `top_tail` (None: it does not). At c·q_K ≥ 1 the spread allows every honest token at the hard bound: then
        c·(e^Λ(λ) − 1) ≥ e^λ − 1, so L_n(λ) ≥ n·λ ≥ λ·S for every prompt or file and every λ: no per-worker factor
        exceeds 1 and no per-file bound falls below 1."""
        if self.miscalibration * top_tail >= 1:
            return (f"verification.miscalibration {self.miscalibration:g} times the margin tail {top_tail:g} of the "
                    "last level is at least 1: the honest spread would allow every token at the hard bound and the "
                    f"margin tests could never challenge; use a miscalibration below {1 / top_tail:.4g}")
        return None

    def margin_null(self) -> MarginNull:
        """The honest margin distribution these rules state."""
        return MarginNull(levels=tuple(self.margin_levels), tail=tuple(self.margin_tail), tokens=self.margin_tokens,
                          spread_shape=self.spread_shape, miscalibration=self.miscalibration)

    def for_policy(self, policy: PolicyVerification | None) -> VerificationSpec:
        """The rules for files of a policy whose manifest carries recalibrated tolerances: each the looser of the
        run spec's and the policy's, so a policy can loosen the run spec's rules and never tighten them.

        - the larger logit tolerance, and level by level the larger margin tail (tails measured at other levels
          are not comparable: only the tolerance is taken then). Both nulls stay valid under the larger
          tolerance, since a token's margin only shrinks as ε grows;
        - TOPLOC: the fewer exponent matches, the larger mantissa-error mean and median, the mean without the
          chunk's largest error if either leaves it out; and for every chunk length the run spec judges by
          calibrated limits (`toploc_by_tokens`), the looser of its and the policy's limits for that length
          (`looser_chunk_limits`). Lengths the run spec judges by the scalar limits stay judged by them."""
        if policy is None:
            return self
        update: dict = {
            "logit_tolerance": max(self.logit_tolerance, policy.logit_tolerance),
            "toploc_min_exp_matches": min(self.toploc_min_exp_matches, policy.toploc_min_exp_matches),
            "toploc_max_mant_err_mean": max(self.toploc_max_mant_err_mean, policy.toploc_max_mant_err_mean),
            "toploc_max_mant_err_median": max(self.toploc_max_mant_err_median, policy.toploc_max_mant_err_median),
            "toploc_mean_excludes_max": self.toploc_mean_excludes_max or policy.toploc_mean_excludes_max,
            "toploc_by_tokens": looser_chunk_limits(self.toploc_by_tokens, policy.toploc_by_tokens),
        }
        if list(policy.margin_levels) == list(self.margin_levels):
            merged = MarginNull.loosest([self.margin_null(), policy.margin_null()])
            update |= {"margin_tail": list(merged.tail), "margin_tokens": merged.tokens}
        return self.model_copy(update=update)

    def toploc_thresholds(self) -> Thresholds:
        """The TOPLOC chunk thresholds these rules state."""
        return Thresholds(min_exp_matches=self.toploc_min_exp_matches, max_mant_err_mean=self.toploc_max_mant_err_mean,
                          max_mant_err_median=self.toploc_max_mant_err_median,
                          mean_excludes_max=self.toploc_mean_excludes_max, by_tokens=tuple(self.toploc_by_tokens))


def looser_chunk_limits(spec: Sequence[ChunkLimits], policy: Sequence[ChunkLimits]) -> list[ChunkLimits]:
    """Calibrated TOPLOC limits by chunk length that are looser than both lists wherever `spec` has limits: one
    entry at each length boundary of either list that `spec` covers, holding the looser of the entries that
    `spec` and `policy` judge that length by (`Thresholds.for_tokens`: the first entry at or above it). A chunk of
    t tokens is judged by the first boundary at or above t, and between two boundaries of the union each list's
    entry is the same, so the merged entry is looser than both for every length. Where the policy has no entry
    for a length, the run spec's stands; lengths past the run spec's last entry keep its scalar limits."""
    def entry_for(limits: Sequence[ChunkLimits], tokens: int) -> ChunkLimits | None:
        return next((e for e in limits if e.tokens >= tokens), None)

    merged = []
    for tokens in sorted({e.tokens for e in spec} | {e.tokens for e in policy}):
        mine = entry_for(spec, tokens)
        if mine is None:
            break
        theirs = entry_for(policy, tokens)
        if theirs is None:
            merged.append(mine.model_copy(update={"tokens": tokens}))
            continue
        counted = mine.exceed_mean is not None and theirs.exceed_mean is not None
        merged.append(ChunkLimits(
            tokens=tokens, chunks=min(mine.chunks, theirs.chunks),
            max_exp_mismatches=max(mine.max_exp_mismatches, theirs.max_exp_mismatches),
            max_mant_err_mean=max(mine.max_mant_err_mean, theirs.max_mant_err_mean),
            max_mant_err_median=max(mine.max_mant_err_median, theirs.max_mant_err_median),
            # P(mean > max level) <= either list's rate: the larger level with the larger rate stays an honest
            # bound; a list that does not count this length (no level) turns the count off
            exceed_mean=max(mine.exceed_mean, theirs.exceed_mean) if counted else None,
            exceed_rate=max(mine.exceed_rate, theirs.exceed_rate) if counted else 1.0))
    return merged


NUCLEUS_SLACK_LIMIT = 0.1
"""With top_p = p < 1 the replay admits a token when the mass above it is below p·e^(2ε/T) (docs/protocol.md,
"Sampling rule v2"): a band of mass p·(e^(2ε/T) − 1) past the nucleus. A run spec is refused when that band is
more than this fraction of the tail 1 − p an honest sampler excludes (at ε ≈ 0.03 and p = 0.95 the band covers
the whole tail: the nucleus check would admit every token)."""


class RunSpec(BaseModel):
    """Task, sampling and verification rules of one pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: str = "proofswarm.runspec"
    version: int = 1
    task: TaskSpec = Field(description="the task the prompts and rewards come from")
    sampling: SamplingSpec = SamplingSpec()
    prompts_per_submission: int = Field(4, ge=1)
    pool_seed: str = Field(pattern=r"^0x[0-9a-f]{64}$", description="public seed of prompt assignment and sampling")
    verification: VerificationSpec = VerificationSpec()
    inference: Literal["float", "exact"] = Field("float", description=(
        "how the policy is computed: float (the checkpoint's float weights; TOPLOC proofs, replay within "
        "verification.logit_tolerance, margin tests) or exact (the checkpoint's integer form, inference.exact: no "
        "proofs, every checked token replayed with tolerance zero; Llama/Qwen2-style models, top_p = 1; "
        "docs/protocol.md §5.1)"))

    @model_validator(mode="after")
    def _sampled(self) -> RunSpec:
        if self.sampling.temperature <= 0:
            raise ValueError("a pool samples with temperature > 0 (seeded Gumbel sampling; GRPO needs varied groups)")
        if self.inference == "exact":
            problem = self.exact_problem()
            if problem:
                raise ValueError(problem)
            return self
        problem = self.nucleus_problem(self.verification.logit_tolerance)
        if problem:
            raise ValueError(problem)
        if self.sampling.max_tokens < self.verification.min_toploc_tokens:
            raise ValueError(f"sampling.max_tokens {self.sampling.max_tokens} is below verification.min_toploc_tokens "
                             f"{self.verification.min_toploc_tokens}: completions that short leave TOPLOC's chunk "
                             "count without chunks to count (docs/protocol.md R6.25)")
        return self

    def exact_problem(self) -> str | None:
        """Why exact mode cannot serve this spec's sampling and verification (None: it can)."""
        if self.sampling.top_p < 1:
            return (f"inference = \"exact\" samples with top_p = 1 only (top-p is not defined over integer logits "
                    f"yet), not {self.sampling.top_p}")
        if self.verification.min_eos_prob > 0:
            return ("inference = \"exact\" replays the EOS token like every other with tolerance zero: "
                    "verification.min_eos_prob must be 0")
        return None

    def prompt_tokens(self) -> int:
        """The most tokens one prompt of a file holds: its group's completions at max_tokens each."""
        return self.sampling.group_size * self.sampling.max_tokens

    def bias_power(self, tokens: int) -> float:
        """The margin test's per-file power against a 1.9ε logit bias at `tokens` checked tokens packed into as few
        prompts as hold them (the grouping with the least power, proofs.margin_power.packed_prompts), under this
        spec's null and spread, false-positive rate, tolerance and temperature (proofs.margin_power)."""
        v = self.verification
        return bias_power(v.margin_null(), packed_prompts(tokens, self.prompt_tokens()), v.false_positive_rate,
                          v.logit_tolerance, self.sampling.temperature)

    def tokens_for_power(self, power: float, most: int) -> int | None:
        """The fewest checked tokens (at most `most`) at which `bias_power` reaches `power`; None if none does."""
        v = self.verification
        return tokens_for_power(v.margin_null(), power, self.prompt_tokens(), v.false_positive_rate,
                                v.logit_tolerance, self.sampling.temperature, most)

    def nucleus_problem(self, tolerance: float) -> str | None:
        """Why `tolerance` makes the replay's nucleus check loose at this spec's top_p < 1 (None: it does not)."""
        top_p, temperature = self.sampling.top_p, self.sampling.temperature
        if top_p < 1 and top_p * math.expm1(2 * tolerance / temperature) > NUCLEUS_SLACK_LIMIT * (1 - top_p):
            limit = temperature / 2 * math.log1p(NUCLEUS_SLACK_LIMIT * (1 - top_p) / top_p)
            return (f"top_p {top_p} with logit_tolerance {tolerance:g} at temperature {temperature:g} makes the sampling "
                    f"replay's nucleus check loose: it admits tokens past a mass of "
                    f"{top_p * math.exp(2 * tolerance / temperature):.4g} (more than a tenth of the {1 - top_p:.4g} an "
                    f"honest top-p sampler never draws from); use top_p = 1, or a logit_tolerance of at most {limit:.3g}")
        return None

    def verification_for(self, policy: PolicyVerification | None) -> VerificationSpec:
        """The rules for files of a policy (its manifest's `verification`, if any): `VerificationSpec.for_policy`,
        unless the loosened tolerance would make the nucleus check loose (`nucleus_problem`), in which case the
        policy's values are ignored and the run spec's apply (the trainer refuses to publish such values)."""
        loosened = self.verification.for_policy(policy)
        return self.verification if self.nucleus_problem(loosened.logit_tolerance) else loosened

    @property
    def pool_seed_bytes(self) -> bytes:
        return bytes.fromhex(self.pool_seed[2:])


class UnrunnablePolicy(Exception):
    """An exact pool's checkpoint that exact mode cannot run: it does not quantise, or its integers break a bound of
    docs/protocol.md R5.6 (inference.exact's InferenceError). The trainer's fault, not a worker's: a worker makes no
    file on its step, a validator gives no verdict on one (R5.8)."""


class TaskUnavailable(Exception):
    """The run spec's task cannot be built on this machine: a dataset file is missing, or its verifiers environment
    is not installed at the pinned version or was refused (tasks.environments). A role refuses to start on it."""


def usable_task(spec: RunSpec) -> Task:
    """The run spec's task, built as every role builds it: what worker, validator and trainer check before they do
    anything else (join, stake, download), so a machine that cannot score the pool's rewards never starts."""
    try:
        return build_task(spec.task)
    except TaskError as exc:
        raise TaskUnavailable(f"the pool's task cannot run here: {exc}") from None


def register_task_subset(data: bytes) -> None:
    """Make a fetched difficulty-subset file (the one a run spec's `task.subset` names) known to this process, so that
    `usable_task` builds the filtered task (tasks.difficulty.register_subset; TaskError if the bytes are not one).
    `ledger_client.ipfs.content.fetch_run_spec` fetches the file and calls this: the client does the I/O, the task
    code stays behind protocol."""
    register_subset(data)


def with_environment_pinned(spec: RunSpec) -> RunSpec:
    """The spec with its verifiers environment's dataset and package files pinned by digest (`trainer init` publishes
    this), so that a party whose environment builds other rows or runs other code refuses to start; other specs
    unchanged."""
    environment = spec.task.environment
    if environment is None or (environment.dataset is not None and environment.source is not None):
        return spec
    try:
        task = build_task(TaskSpec(name="env", environment=environment))
    except TaskError as exc:
        raise TaskUnavailable(f"the pool's task cannot run here: {exc}") from None
    pinned = environment.model_copy(update={"dataset": task.dataset_digest, "source": task.source_digest})  # type: ignore[attr-defined]
    return spec.model_copy(update={"task": spec.task.model_copy(update={"environment": pinned})})


class RunSpecFileError(ValueError):
    """A run spec file is missing or is not TOML."""


def load_run_spec(path: Path) -> RunSpec:
    """A RunSpec from TOML (see examples/run.toml); RunSpecFileError or pydantic's ValidationError otherwise."""
    try:
        return RunSpec.model_validate(tomllib.loads(Path(path).read_text()))
    except FileNotFoundError:
        raise RunSpecFileError(f"run spec {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise RunSpecFileError(f"run spec {path} is not valid TOML: {exc}") from None


def load_policy_verification(path: Path, spec: RunSpec) -> PolicyVerification:
    """The tolerances a trainer attaches to the policies it publishes (`trainer start --policy-verification`):
    the logit tolerance, margin tails and TOPLOC limits of the `[verification]` table that `validator calibrate
    --out` writes (its other fields are the run spec's business and are not read). RunSpecFileError, with one
    line naming the problem, when the file is missing or malformed, lacks a field, states tails at other levels
    than the pool's, would make the pool's nucleus check loose or its per-worker margin test blind (tails at which
    the run spec's miscalibration allows every token at the hard bound); values that only tighten the run spec's are
    accepted and change nothing."""
    try:
        table = tomllib.loads(Path(path).read_text()).get("verification")
    except FileNotFoundError:
        raise RunSpecFileError(f"policy verification file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RunSpecFileError(f"policy verification file {path} is not readable TOML: {exc}") from None
    if not isinstance(table, dict):
        raise RunSpecFileError(f"policy verification file {path} has no [verification] table")
    fields = list(PolicyVerification.model_fields)
    missing = [name for name in fields if name not in table]
    if missing:
        raise RunSpecFileError(f"policy verification file {path} lacks {', '.join(missing)} (write it with "
                               "`validator calibrate --out`)")
    try:
        policy = PolicyVerification.model_validate({name: table[name] for name in fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunSpecFileError(f"policy verification file {path}: {where + ': ' if where else ''}{first['msg']}") from None
    if list(policy.margin_levels) != list(spec.verification.margin_levels):
        raise RunSpecFileError(f"policy verification file {path} states margin tails at levels {policy.margin_levels}, "
                               f"the pool's run spec at {spec.verification.margin_levels}")
    problem = (spec.nucleus_problem(max(policy.logit_tolerance, spec.verification.logit_tolerance))
               or spec.verification.miscalibration_problem(policy.margin_tail[-1]))
    if problem:
        raise RunSpecFileError(f"policy verification file {path}: {problem}")
    return policy
