"""proofswarm-digit-sort: a single-turn `verifiers` environment (taskset) built in the proofswarm repository.

The prompt is `sort:<digits>=`; the answer is the completion's first line, the digits in ascending order.
Problems are generated here from a seed (nothing is downloaded). The rubric is two pure functions of the
completion's text, so every party that scores a completion gets the same reward:

- `exact` (weight 1): 1 when the first line equals the sorted digits, else 0;
- `in_place` (weight 1/4): the fraction of positions of the first line that hold the right digit, over the
  longer of the answer and the reference (partial credit: a tiny policy's groups differ from the start).

A perfect answer scores 1.25. Load it with `verifiers.v1.load_taskset(TasksetConfig(id="proofswarm-digit-sort"))`
or name it in a proofswarm run spec (`[task.environment]`, docs/protocol.md).
"""

from __future__ import annotations

import random

import verifiers.v1 as vf

__all__ = ["DigitSortConfig", "DigitSortData", "DigitSortTask", "DigitSortTaskset"]


def first_line(reply: str) -> str:
    """The answer of a completion: its text up to the first newline, without surrounding spaces."""
    return reply.split("\n", 1)[0].strip(" \t\r")


class DigitSortData(vf.TaskData):
    answer: str
    """The digits of the prompt in ascending order."""


class DigitSortTask(vf.Task[DigitSortData]):
    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def exact(self, trace: vf.Trace) -> float:
        return 1.0 if first_line(_reply(trace)) == self.data.answer else 0.0

    @vf.reward(weight=0.25)
    async def in_place(self, trace: vf.Trace) -> float:
        answer, gold = first_line(_reply(trace)), self.data.answer
        right = sum(1 for a, g in zip(answer, gold) if a == g)
        return right / max(len(answer), len(gold))


def _reply(trace: vf.Trace) -> str:
    """The completion: the last assistant message, unstripped (Trace.last_reply strips the whole text)."""
    replies = trace.assistant_messages
    return (replies[-1].content or "") if replies else ""


class DigitSortConfig(vf.TasksetConfig):
    size: int = 2000
    """Number of problems."""
    seed: int = 0
    """Seed of the generator: the same seed gives the same problems on every machine."""
    min_digits: int = 3
    max_digits: int = 5


class DigitSortTaskset(vf.Taskset[DigitSortTask, DigitSortConfig]):
    def load(self) -> list[DigitSortTask]:
        config = self.config
        if not 1 <= config.min_digits <= config.max_digits:
            raise ValueError(f"need 1 <= min_digits <= max_digits, got {config.min_digits}, {config.max_digits}")
        tasks = []
        for index in range(config.size):
            rng = random.Random(f"digit-sort:{config.seed}:{index}")
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(config.min_digits, config.max_digits)))
            data = DigitSortData(id=f"{config.seed}-{index}", prompt=f"sort:{digits}=", answer="".join(sorted(digits)))
            tasks.append(DigitSortTask(data, config.task))
        return tasks
