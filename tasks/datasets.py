"""User datasets in JSONL and reasoning-gym's procedural generators, as Tasks.

Both take the completion's final answer by tasks.verify's format rule (one `<answer>…</answer>`,
else one `\\boxed{…}`), bound it (tasks.verify), and score it with a library in the scoring
sandbox (tasks.sandbox): math answers with math-verify, reasoning-gym answers with the dataset's own
`score_answer`. The reward is 1 for an accepted answer and 0 otherwise (tasks.rewards).
"""

from __future__ import annotations

import base64
import json
import pickle
import re
from fractions import Fraction
from pathlib import Path

from tasks.base import Problem, Split, Task, TaskError, in_test_split
from tasks.gym import check_gym_dataset
from tasks.rewards import CORRECT, WRONG
from tasks.sandbox import shared_sandbox
from tasks.verify import (
    ASCII_WHITESPACE,
    NUMERIC_LITERAL,
    admissible_gym_answer,
    admissible_math_answer,
    final_answer,
    is_word_answer,
    matching_bracket,
    normalise_whitespace,
    strip_math_delimiters,
)

_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox)\s*\{(.*)\}", re.DOTALL)


def _unwrap_text(answer: str) -> str:
    m = _TEXT_WRAPPER.fullmatch(answer.strip())
    return normalise_whitespace(m.group(1) if m else answer)


def exact_value(text: str) -> Fraction | None:
    """The exact value of a numeric literal without a percent sign (tasks.verify.is_numeric_literal: an integer,
    a decimal with optional thousands separators, a/b or \\frac{a}{b}, a sign, a leading `\\$`), else None."""
    literal = NUMERIC_LITERAL.fullmatch(strip_math_delimiters(text.strip(ASCII_WHITESPACE)))
    if literal is None or literal.group("pct"):
        return None
    body = re.sub(r"\s+", "", literal.group(0))
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-").removeprefix("\\$")
    fraction = (re.fullmatch(r"\\[dt]?frac\{([+-]?)([0-9]+)\}\{([0-9]+)\}", body)
                or re.fullmatch(r"\\[dt]?frac()([0-9])([0-9])", body) or re.fullmatch(r"()([0-9]+)/([0-9]+)", body))
    if fraction:
        if int(fraction.group(3)) == 0:
            return None
        inner = -1 if fraction.group(1) == "-" else 1
        return sign * inner * Fraction(int(fraction.group(2)), int(fraction.group(3)))
    return sign * Fraction(body.replace(",", ""))


def _outer_list(text: str) -> tuple[str, list[str]] | None:
    """A comma list at the top level of `text`: (its brackets, e.g. "()" "[)" "" or "set" for \\{…\\}, its
    items), or None when `text` has no top-level comma. `\\left`/`\\right` are ignored."""
    body = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", strip_math_delimiters(text.strip(ASCII_WHITESPACE)))
    body = body.strip(ASCII_WHITESPACE)
    brackets = ""
    if body.startswith("\\{") and body.endswith("\\}"):
        brackets, body = "set", body[2:-2]
    elif body[:1] in "([" and body[-1:] in ")]" and matching_bracket(body, 0) == len(body) - 1:
        brackets, body = body[0] + body[-1], body[1:-1]  # the first bracket closes at the end: it encloses all
    items, depth, start = [], 0, 0
    for position, c in enumerate(body):
        depth += (c in "([{") - (c in ")]}")
        if c == "," and depth == 0:
            items.append(body[start:position])
            start = position + 1
    items.append(body[start:])
    if len(items) < 2 and brackets != "set":
        return None
    return brackets, [item.strip(ASCII_WHITESPACE) for item in items]


def math_answer_correct(answer: str, gold: str) -> bool:
    """A math answer against its reference. The same text (whitespace aside) is correct. A reference with a word
    in it is compared as text (a `\\text{}` wrapper aside). A numeric reference (no percent sign) takes a numeric
    literal of exactly its value (`2.5`, `5/2`, `\\frac{5}{2}`, `2.50`; not `2.5000004`: no tolerance). A comma
    list is ordered: a tuple, interval or bare list takes the same brackets and, item by item in order, correct
    items (`1,2,3` is not `3,2,1`); a set `\\{…\\}` takes a set. Otherwise the answer must pass
    tasks.verify.admissible_math_answer and math-verify must find it equal to the reference."""
    if normalise_whitespace(answer) == normalise_whitespace(gold):
        return True
    if is_word_answer(gold):
        return _unwrap_text(answer) == _unwrap_text(gold)
    if not admissible_math_answer(answer, gold):
        return False
    gold_value = exact_value(gold)
    if gold_value is not None:
        return exact_value(answer) == gold_value
    gold_list, answer_list = _outer_list(gold), _outer_list(answer)
    if gold_list is not None or answer_list is not None:
        if gold_list is None or answer_list is None or gold_list[0] != answer_list[0]:
            return False
        if gold_list[0] != "set":
            return len(gold_list[1]) == len(answer_list[1]) and all(
                math_answer_correct(mine, theirs) for mine, theirs in zip(answer_list[1], gold_list[1]))
    reply = shared_sandbox("math").request({"op": "math", "gold": gold, "answer": answer})
    return bool(reply.get("ok") and reply.get("full"))


class JsonlTask(Task):
    """One problem per line: {"prompt": str, "answer": str|number}.

    The completion's final answer (one <answer>…</answer>, else one \\boxed{}) is scored by
    `math_answer_correct` (math-verify). The test split is the lines whose prompt hash falls in
    `test_fraction`; pass test_fraction=0 to train on every line.
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
        answer = final_answer(completion)
        return answer is not None and math_answer_correct(answer, problem.answer)

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        return CORRECT if self.is_correct(problem, completion) else WRONG


class ReasoningGymTask(Task):
    """A reasoning-gym generator, scored by the dataset's own `score_answer` on the extracted final
    answer, in the scoring sandbox. Only full credit pays: reward 1 iff score_answer returns exactly
    1.0, else 0 (partial credit for a near miss or a formatted-but-wrong answer pays nothing, so it
    cannot be farmed)."""

    def __init__(self, dataset: str, seed: int = 0, size: int = 1000, test_size: int = 100, **params: object) -> None:
        try:
            import reasoning_gym
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise TaskError("reasoning-gym is not installed") from exc
        self.name = f"gym:{dataset}"
        self.dataset = dataset
        check_gym_dataset(dataset)
        try:
            json.dumps(params)
        except (TypeError, ValueError) as exc:
            raise TaskError(f"reasoning-gym parameters must be JSON values: {exc}") from exc
        self._params = params
        self._builds = {"train": (seed, size), "test": (seed + 1_000_003, test_size)}
        try:
            self._data = {split: reasoning_gym.create_dataset(dataset, seed=s, size=n, **params)
                          for split, (s, n) in self._builds.items()}
        except (KeyError, ValueError, TypeError, AssertionError) as exc:
            raise TaskError(f"reasoning-gym cannot build {dataset!r}: {exc}") from exc

    def size(self, split: Split = "train") -> int:
        return len(self._data[split])

    def problem(self, index: int, split: Split = "train") -> Problem:
        data = self._data[split]
        if not 0 <= index < len(data):
            raise TaskError(f"{self.name}: {split} index {index} out of range [0, {len(data)})")
        entry = data[index]
        return Problem(index=index, prompt=entry["question"], answer=str(entry["answer"]),
                       metadata={"gym_split": split, "gym_index": index})

    def is_correct(self, problem: Problem, completion: str) -> bool:
        answer = final_answer(completion)
        if answer is None or not admissible_gym_answer(answer, problem.answer):
            return False
        split, index = problem.metadata["gym_split"], problem.metadata["gym_index"]
        entry = self._data[split][index]  # type: ignore[index]
        seed, size = self._builds["train"]  # the scorer needs the dataset's configuration, not its entries
        sandbox = shared_sandbox("gym", gym={"dataset": self.dataset, "seed": seed, "size": size,
                                             "params": self._params})
        reply = sandbox.request({"op": "gym", "entry": base64.b64encode(pickle.dumps(entry)).decode(),
                                 "answer": answer})
        return bool(reply.get("ok") and reply.get("full"))

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        return CORRECT if self.is_correct(problem, completion) else WRONG
