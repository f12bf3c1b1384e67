"""Length-target rewards: ask for a completion of T tokens and reward closeness to it."""

from __future__ import annotations

import random
from dataclasses import replace
from fractions import Fraction

from tasks.base import Problem, Split, Task, TaskError
from tasks.rewards import canonical_reward

LENGTH_PENALTY = Fraction(3, 10_000)
"""Reward lost per token of distance to the target: exactly 3/10000 (a rational, see tasks.rewards)."""


class LengthTargetTask(Task):
    """Wraps a task: appends a target length T to each instruction and subtracts
    0.0003·|T − completion tokens| from the base reward. T is drawn per problem,
    deterministically, from `targets`. The reward is computed exactly, base − 3/10000·|T − n|
    as a rational, then rounded once to float32 (tasks.rewards.canonical_reward)."""

    def __init__(self, base: Task, targets: tuple[int, ...], seed: int = 0,
                 penalty: Fraction | int | str = LENGTH_PENALTY) -> None:
        if not targets or any(t <= 0 for t in targets):
            raise TaskError(f"length targets must be positive token counts, got {targets}")
        if isinstance(penalty, float):
            raise TaskError("the length penalty is exact: give a Fraction or a decimal string, not a float")
        self.base = base
        self.targets = targets
        self.seed = seed
        self.penalty = Fraction(penalty)
        self.name = f"{base.name}+length"

    def size(self, split: Split = "train") -> int | None:
        return self.base.size(split)

    def problem(self, index: int, split: Split = "train") -> Problem:
        inner = self.base.problem(index, split)
        target = random.Random(f"length:{self.seed}:{split}:{index}").choice(self.targets)
        return replace(
            inner,
            prompt=f"{inner.prompt}\n(Think for {target} tokens.)",
            metadata={**inner.metadata, "length_target": target},
        )

    def is_correct(self, problem: Problem, completion: str) -> bool:
        return self.base.is_correct(problem, completion)

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        target = int(problem.metadata["length_target"])  # type: ignore[arg-type]
        base = Fraction(self.base.reward(problem, completion, completion_tokens))  # a float32: exact
        return canonical_reward(base - self.penalty * abs(target - int(completion_tokens)))
