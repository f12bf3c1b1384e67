"""Held-out evaluation of a policy."""

from __future__ import annotations

from collections.abc import Callable

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
    completions = TorchBackend(model, device=next(model.parameters()).device).generate(  # where the trainer keeps it
        [encode_prompt(tokenizer, p.prompt) for p in problems],
        SamplingSpec(temperature=0.0, max_tokens=max_tokens),
        [0] * n_problems,
    )
    solved = sum(
        task.is_correct(p, tokenizer.decode(c.token_ids, skip_special_tokens=True))
        for p, c in zip(problems, completions, strict=True)
    )
    return solved / n_problems


def policy_sampler(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, temperature: float, max_tokens: int, seed: int = 0
) -> Callable[[list[str]], list[str]]:
    """A `tasks.difficulty.SampleFn`: one sampled completion text per prompt, fresh seeds per call."""
    calls = [0]

    def sample(prompts: list[str]) -> list[str]:
        base = seed + calls[0] * len(prompts)
        calls[0] += 1
        completions = TorchBackend(model).generate(
            [encode_prompt(tokenizer, p) for p in prompts],
            SamplingSpec(temperature=temperature, max_tokens=max_tokens),
            [base + i for i in range(len(prompts))],
        )
        return [tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in completions]

    return sample
