"""Offline difficulty filtering: keep the problems a policy solves sometimes, not always."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
            # token count is not known to a text-level sampler; length targets do not apply here
            solved[problem.index] += task.reward(problem, completion, len(completion)) >= 1.0
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
