"""Held-out evaluation of a policy."""

from __future__ import annotations

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from inference.torch_backend import TorchBackend
from protocol.runspec import SamplingSpec
from tasks.base import Task
from tasks.encoding import encode_prompt


def greedy_accuracy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, task: Task, n_problems: int, max_tokens: int
) -> float:
    """Fraction of the first `n_problems` held-out (test split) problems solved greedily."""
    problems = [task.problem(i, "test") for i in range(n_problems)]
    completions = TorchBackend(model).generate(
        [encode_prompt(tokenizer, p.prompt) for p in problems],
        SamplingSpec(temperature=0.0, max_tokens=max_tokens),
        [0] * n_problems,
    )
    solved = sum(
        task.reward(p, tokenizer.decode(c.token_ids, skip_special_tokens=True), len(c.token_ids)) >= 1.0
        for p, c in zip(problems, completions, strict=True)
    )
    return solved / n_problems
