"""Short procedural tasks a character-level model of a few million parameters can learn.

Prompts are compact (`rev:4721=`), the answer is the completion's first line (without surrounding
ASCII whitespace), compared as a string: exactly equal or reward 0. A string comparison of a bounded
line needs no sandbox. Problems are deterministic in (seed, split, index); train and test are disjoint
(by prompt hash, see `in_test_split`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tasks.base import Problem, Split, Task, TaskError, in_test_split
from tasks.rewards import CORRECT, WRONG
from tasks.verify import first_line

_MAX_DRAWS = 10_000


class DigitTask(Task):
    """A task on a random digit string: the answer is a function of the digits."""

    def __init__(
        self,
        name: str,
        solve: Callable[[str], str],
        seed: int = 0,
        min_digits: int = 3,
        max_digits: int = 5,
        test_fraction: float = 0.1,
    ) -> None:
        if not 1 <= min_digits <= max_digits:
            raise TaskError(f"need 1 <= min_digits <= max_digits, got {min_digits}, {max_digits}")
        if not 0 < test_fraction < 1:
            raise TaskError(f"test_fraction must be in (0, 1), got {test_fraction}")
        self.name = name
        self._solve = solve
        self.seed = seed
        self.min_digits = min_digits
        self.max_digits = max_digits
        self.test_fraction = test_fraction

    def _draw(self, rng: random.Random) -> str:
        n = rng.randint(self.min_digits, self.max_digits)
        return "".join(rng.choice("0123456789") for _ in range(n))

    def problem(self, index: int, split: Split = "train") -> Problem:
        if index < 0:
            raise TaskError(f"problem index must be >= 0, got {index}")
        rng = random.Random(f"{self.name}:{self.seed}:{split}:{index}")
        want_test = split == "test"
        for _ in range(_MAX_DRAWS):
            digits = self._draw(rng)
            prompt = f"{self.name}:{digits}="
            if in_test_split(prompt, self.test_fraction) == want_test:
                return Problem(index=index, prompt=prompt, answer=self._solve(digits))
        raise TaskError(f"{self.name}: no {split} problem found in {_MAX_DRAWS} draws; widen the digit range")

    def is_correct(self, problem: Problem, completion: str) -> bool:
        return first_line(completion) == problem.answer

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        return CORRECT if self.is_correct(problem, completion) else WRONG


SOLVERS: dict[str, Callable[[str], str]] = {
    "rev": lambda d: d[::-1],
    "copy": lambda d: d,
    "sort": lambda d: "".join(sorted(d)),
    "sum": lambda d: str(sum(int(c) for c in d)),
    "max": lambda d: max(d),
}
