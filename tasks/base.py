"""What a task is: deterministic problems by index and an exact reward verifier."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

from tasks.rewards import rewards_equal

Split = Literal["train", "test"]


class TaskError(Exception):
    """A task was asked for something it cannot give (unknown name, bad parameters, bad data)."""


@dataclass(frozen=True)
class Problem:
    """One prompt with its reference answer; `index` is its position in the task's split."""

    index: int
    prompt: str
    answer: str
    metadata: dict[str, object] = field(default_factory=dict)


class Task(ABC):
    """A source of problems, deterministic in (seed, split, index), with a verifier.

    Worker, validator and trainer build the same Task from the same spec and must agree
    on every problem and every reward.
    """

    name: str

    @abstractmethod
    def problem(self, index: int, split: Split = "train") -> Problem:
        """The problem at `index` of `split`; the same on every machine."""

    @abstractmethod
    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        """Score a completion (text without special tokens, and its length in tokens).

        The value is exact (tasks.rewards): a rational rounded once to float32, the same bits on
        every machine, so that parties compare rewards with `tasks.rewards.rewards_equal`.
        """

    def reward_matches(self, problem: Problem, completion: str, completion_tokens: int, claimed: float) -> bool:
        """The reward check of a claimed reward: bit-identical to this task's reward of the completion
        (tasks.rewards.rewards_equal; no tolerance)."""
        return rewards_equal(self.reward(problem, completion, completion_tokens), claimed)

    def is_correct(self, problem: Problem, completion: str) -> bool:
        """The verifier's verdict on the answer alone. Tasks whose reward is shaped (length
        targets, partial credit) override this; "solved" means this, not reward ≥ 1."""
        return self.reward(problem, completion, len(completion)) >= 1.0

    def size(self, split: Split = "train") -> int | None:
        """Number of problems in `split`, or None when the task is unbounded."""
        return None


def in_test_split(prompt: str, test_fraction: float) -> bool:
    """Whether a procedural prompt belongs to the held-out split (a hash of its text).

    Splitting by the prompt's own hash keeps train and test disjoint however many
    problems either side draws.
    """
    bucket = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big") / 2**64
    return bucket < test_fraction


UNBOUNDED_ASSIGNMENT_SPACE = 2**62


def assignment_space(task: Task) -> int:
    """The index range prompt assignment draws from: the train split's size, or 2^62 for
    procedural tasks (whose problems exist at every index). Worker and validator must agree."""
    return task.size("train") or UNBOUNDED_ASSIGNMENT_SPACE
