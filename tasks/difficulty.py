"""Offline difficulty filtering: keep the problems a policy solves sometimes, not always.

A pool measures the pass rates once, with its base policy, and stores the result as a
`DifficultySubset` file on IPFS; the task spec names that file by its digest
(`TaskSpec.subset`), so the run spec fixes the subset and worker, validator and trainer
train on the same problems. A process that builds such a task first registers the file's
bytes (`register_subset`, after fetching them), and `build_task` checks them against the
digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.base import Problem, Split, Task, TaskError

DEFAULT_BAND = (0.1, 0.8)

# (prompts) -> one completion text per prompt, sampled from the policy being measured.
SampleFn = Callable[[list[str]], list[str]]


@dataclass(frozen=True)
class DifficultyReport:
    """Which problem indices were kept and the measured pass rate of each."""

    kept: list[int]
    pass_rates: dict[int, float]
    band: tuple[float, float]


def measure_pass_rates(task: Task, problems: Sequence[Problem], sample: SampleFn, attempts: int) -> dict[int, float]:
    """Fraction of `attempts` samples per problem that the task's verifier accepts."""
    if attempts < 1:
        raise TaskError(f"attempts must be >= 1, got {attempts}")
    solved = {p.index: 0 for p in problems}
    prompts = [p.prompt for p in problems]
    for _ in range(attempts):
        completions = sample(prompts)
        if len(completions) != len(problems):
            raise TaskError(f"sample function returned {len(completions)} completions for {len(problems)} prompts")
        for problem, completion in zip(problems, completions, strict=True):
            # solved = the verifier's correctness, not reward ≥ 1 (a length penalty would
            # make every correct answer count as unsolved)
            solved[problem.index] += task.is_correct(problem, completion)
    return {index: count / attempts for index, count in solved.items()}


def filter_by_difficulty(
    task: Task,
    indices: Sequence[int],
    sample: SampleFn,
    attempts: int = 8,
    band: tuple[float, float] = DEFAULT_BAND,
) -> DifficultyReport:
    """Keep the train problems whose pass rate lies in [low, high] (default [0.1, 0.8])."""
    low, high = band
    if not 0 <= low <= high <= 1:
        raise TaskError(f"band must satisfy 0 <= low <= high <= 1, got {band}")
    problems = [task.problem(i) for i in indices]
    rates = measure_pass_rates(task, problems, sample, attempts)
    kept = [i for i in indices if low <= rates[i] <= high]
    return DifficultyReport(kept=kept, pass_rates=rates, band=band)


class SubsetTask(Task):
    """The train problems of `base` at `indices` (e.g. a difficulty filter's `kept`),
    renumbered 0…n−1; the test split is the base task's."""

    def __init__(self, base: Task, indices: Sequence[int]) -> None:
        if not indices:
            raise TaskError("a subset task needs at least one problem index")
        self.base = base
        self.indices = list(indices)
        self.name = f"{base.name}[subset]"

    def size(self, split: Split = "train") -> int | None:
        return len(self.indices) if split == "train" else self.base.size(split)

    def problem(self, index: int, split: Split = "train") -> Problem:
        if split == "test":
            return self.base.problem(index, "test")
        if not 0 <= index < len(self.indices):
            raise TaskError(f"{self.name}: index {index} out of range [0, {len(self.indices)})")
        inner = self.base.problem(self.indices[index])
        return Problem(index=index, prompt=inner.prompt, answer=inner.answer, metadata=inner.metadata)

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        return self.base.reward(problem, completion, completion_tokens)


class DifficultySubset(BaseModel):
    """The stored result of an offline filter: which train problems of `task` to keep."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: str = "proofswarm.difficulty-subset"
    version: int = 1
    task: dict[str, Any] = Field(description="the task spec it was measured on, without `subset`")
    base_checkpoint: str = Field("", description="digest of the policy that measured it, 0x-hex ('' if none)")
    attempts: int = Field(ge=1)
    band: tuple[float, float]
    candidates: int = Field(ge=1, description="train indices 0 … candidates−1 were measured")
    kept: list[int] = Field(min_length=1)
    pass_rates: list[float] = Field(description="pass rate of each candidate index")

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()

    @property
    def digest(self) -> str:
        """sha256 of the stored bytes, 0x-hex: the IPFS raw-object digest named by the task spec."""
        return subset_digest(self.to_bytes())


def subset_digest(data: bytes) -> str:
    return "0x" + hashlib.sha256(data).hexdigest()


def difficulty_subset(
    task: Task, task_spec: dict[str, Any], candidates: int, sample: SampleFn, attempts: int = 8,
    band: tuple[float, float] = DEFAULT_BAND, base_checkpoint: str = "",
) -> DifficultySubset:
    """Measure train problems 0 … candidates−1 with `sample` and keep the band.

    `task_spec` is the task's `TaskSpec.model_dump(mode="json")` (the form `build_task` checks).
    """
    report = filter_by_difficulty(task, range(candidates), sample, attempts, band)
    if not report.kept:
        raise TaskError(f"no problem of the first {candidates} has a pass rate in {band}")
    return DifficultySubset(
        task={k: v for k, v in task_spec.items() if k != "subset"}, base_checkpoint=base_checkpoint,
        attempts=attempts, band=band, candidates=candidates, kept=report.kept,
        pass_rates=[report.pass_rates[i] for i in range(candidates)],
    )


_REGISTERED: dict[str, DifficultySubset] = {}


def register_subset(data: bytes) -> str:
    """Make a fetched subset file known to `build_task` in this process; returns its digest."""
    try:
        subset = DifficultySubset.model_validate_json(data)
    except ValueError as exc:
        raise TaskError(f"not a difficulty subset file: {exc}") from exc
    digest = subset_digest(data)
    _REGISTERED[digest] = subset
    return digest


def registered_subset(digest: str, task_spec: dict[str, Any]) -> DifficultySubset:
    """The registered subset with this digest, checked to belong to `task_spec`."""
    subset = _REGISTERED.get(digest)
    if subset is None:
        raise TaskError(f"task spec names difficulty subset {digest}, which this process has not fetched")
    if subset.task != {k: v for k, v in task_spec.items() if k != "subset"}:
        raise TaskError(f"difficulty subset {digest} was measured on another task: {subset.task}")
    return subset
