"""A short synchronous GRPO run on a real (tiny) policy: the reward must go up."""

import json

import torch

from examples.cpu_run import RunSpec, run_sync
from tasks.registry import TaskSpec
from trainer.config import ModelSpec


def test_grpo_raises_the_reward_of_a_warm_started_policy(tmp_path):
    torch.set_num_threads(1)
    spec = RunSpec(
        task=TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}),
        model=ModelSpec(hidden=64, layers=2, heads=4),
        warm_steps=40, warm_lr=5e-3, lr=2e-3, group_size=8, prompts_per_file=8, batch_samples=64, max_tokens=5,
        eval_every=30, eval_problems=50, target=1.1, budget_s=120.0, max_steps=30,
    )
    result = run_sync(spec, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward"] for r in rows if "reward" in r]
    assert result.steps == 30
    first, last = sum(rewards[:8]) / 8, sum(rewards[-8:]) / 8
    assert last > first + 0.1, (first, last)
