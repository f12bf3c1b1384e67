"""User datasets in JSONL and reasoning-gym's procedural generators, as Tasks."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.base import Problem, Split, Task, TaskError, in_test_split
from tasks.verify import answers_match, extract_answer


class JsonlTask(Task):
    """One problem per line: {"prompt": str, "answer": str|number}.

    The completion's final answer (<answer>, \\boxed{} or last line) is compared exactly,
    numerically, or symbolically (see `answers_match`). The test split is the lines whose
    prompt hash falls in `test_fraction`; pass test_fraction=0 to train on every line.
    """

    def __init__(self, path: str | Path, test_fraction: float = 0.0, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or f"jsonl:{self.path.name}"
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise TaskError(f"cannot read dataset {self.path}: {exc.strerror}") from exc
        self._splits: dict[str, list[tuple[str, str]]] = {"train": [], "test": []}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskError(f"{self.path}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or "answer" not in row:
                raise TaskError(f'{self.path}:{number}: expected {{"prompt": str, "answer": ...}}')
            if not isinstance(row["answer"], (str, int, float)) or isinstance(row["answer"], bool):
                raise TaskError(f"{self.path}:{number}: answer must be a string or a number")
            split = "test" if test_fraction > 0 and in_test_split(row["prompt"], test_fraction) else "train"
            self._splits[split].append((row["prompt"], str(row["answer"])))
        if not self._splits["train"]:
            raise TaskError(f"{self.path}: no training problems")

    def size(self, split: Split = "train") -> int:
        return len(self._splits[split])

    def problem(self, index: int, split: Split = "train") -> Problem:
        rows = self._splits[split]
        if not 0 <= index < len(rows):
            raise TaskError(f"{self.name}: {split} index {index} out of range [0, {len(rows)})")
        prompt, answer = rows[index]
        return Problem(index=index, prompt=prompt, answer=answer)

    def is_correct(self, problem: Problem, completion: str) -> bool:
        return answers_match(extract_answer(completion), problem.answer)

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        return 1.0 if self.is_correct(problem, completion) else 0.0


class ReasoningGymTask(Task):
    """A reasoning-gym generator; its own scorer is not used (it gives partial credit for
    substrings): the answer is extracted first and compared with `answers_match`."""

    def __init__(self, dataset: str, seed: int = 0, size: int = 1000, test_size: int = 100, **params: object) -> None:
        try:
            import reasoning_gym
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise TaskError("reasoning-gym is not installed") from exc
        self.name = f"gym:{dataset}"
        try:
            self._data = {
                "train": reasoning_gym.create_dataset(dataset, seed=seed, size=size, **params),
                "test": reasoning_gym.create_dataset(dataset, seed=seed + 1_000_003, size=test_size, **params),
            }
        except (KeyError, ValueError, TypeError, AssertionError) as exc:
            raise TaskError(f"reasoning-gym cannot build {dataset!r}: {exc}") from exc

    def size(self, split: Split = "train") -> int:
        return len(self._data[split])

    def problem(self, index: int, split: Split = "train") -> Problem:
        data = self._data[split]
        if not 0 <= index < len(data):
            raise TaskError(f"{self.name}: {split} index {index} out of range [0, {len(data)})")
        entry = data[index]
        return Problem(index=index, prompt=entry["question"], answer=str(entry["answer"]))

    def is_correct(self, problem: Problem, completion: str) -> bool:
        return answers_match(extract_answer(completion), problem.answer)

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        return 1.0 if self.is_correct(problem, completion) else 0.0
