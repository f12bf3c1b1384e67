"""A short synchronous GRPO run on a real (tiny) policy: the reward must go up."""

import json

import torch

from examples.cpu_run import CpuRecipe, run_sync


def test_grpo_raises_the_reward_of_a_warm_started_policy(tmp_path):
    torch.set_num_threads(1)
    spec = CpuRecipe(warm_steps=35, max_steps=20, eval_every=20, eval_problems=50, target=1.1, budget_s=300.0)
    result = run_sync(spec, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward"] for r in rows if r.get("reward") is not None]
    assert result.steps == 20
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > 1.5 * first + 0.01, (first, last)
