"""Verifiable tasks: deterministic problems and exact reward verifiers (rewards compare with
`rewards_equal`: bit-identical, no tolerance)."""

from tasks.base import Problem, Task, TaskError
from tasks.registry import TaskSpec, build_task, register_task, task_names
from tasks.rewards import UNSCORABLE, canonical_reward, rewards_equal

__all__ = ["UNSCORABLE", "Problem", "Task", "TaskError", "TaskSpec", "build_task", "canonical_reward",
           "register_task", "rewards_equal", "task_names"]
