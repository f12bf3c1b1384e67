"""Verifiable tasks: deterministic problems and exact reward verifiers."""

from tasks.base import Problem, Task, TaskError
from tasks.registry import TaskSpec, build_task, register_task, task_names

__all__ = ["Problem", "Task", "TaskError", "TaskSpec", "build_task", "register_task", "task_names"]
