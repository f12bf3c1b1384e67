"""The task registry: a TaskSpec (name, seed, parameters) builds the same Task everywhere."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, model_validator

from tasks.base import Task, TaskError
from tasks.datasets import JsonlTask, ReasoningGymTask
from tasks.difficulty import SubsetTask, registered_subset
from tasks.environments import EnvironmentSpec, EnvironmentTask
from tasks.length import LengthTargetTask
from tasks.procedural import SOLVERS, DigitTask


class TaskSpec(BaseModel):
    """How to build a task: `rev`, `copy`, `sort`, `sum`, `jsonl` (params: path),
    `gym:<reasoning-gym dataset>` (one whose scorer evaluates nothing, tasks.gym), or `env` with an
    `environment` table (a verifiers environment, tasks.environments); optional length targets wrap any of them, and an optional difficulty subset
    (tasks.difficulty) keeps only the train problems it lists."""

    name: str = "rev"
    seed: int = 0
    params: dict[str, Any] = Field(default_factory=dict)
    length_targets: tuple[int, ...] = ()
    subset: str | None = Field(None, pattern=r"^0x[0-9a-f]{64}$",
                               description="digest of a difficulty subset file on IPFS")
    environment: EnvironmentSpec | None = Field(
        None, exclude_if=lambda value: value is None,  # absent from the JSON of other tasks: their digests stay
        description="the verifiers environment of task `env` (package, pinned versions, arguments)")

    @model_validator(mode="after")
    def _environment_named(self) -> TaskSpec:
        if (self.name == "env") != (self.environment is not None):
            raise ValueError("task `env` needs an [task.environment] table (package, version), and only it takes one")
        if self.environment is not None and self.params:
            raise ValueError("task `env` takes its arguments in [task.environment] args, not params")
        return self


def _digit_factory(name: str) -> Callable[..., Task]:
    return lambda seed, **params: DigitTask(name, SOLVERS[name], seed=seed, **params)


_FACTORIES: dict[str, Callable[..., Task]] = {name: _digit_factory(name) for name in SOLVERS}
_FACTORIES["jsonl"] = lambda seed, **params: JsonlTask(**params)


_ENVIRONMENT_TASKS: dict[str, EnvironmentTask] = {}
_ENVIRONMENT_LOCK = threading.Lock()


def register_task(name: str, factory: Callable[..., Task]) -> None:
    """Add a task factory `factory(seed, **params) -> Task` under `name`."""
    if name in _FACTORIES or name.startswith("gym:") or name == "env":
        raise TaskError(f"task name {name!r} is already taken")
    _FACTORIES[name] = factory


def task_names() -> list[str]:
    """Registered task names (reasoning-gym datasets are reached as gym:<name>)."""
    return sorted(_FACTORIES)


def build_task(spec: TaskSpec) -> Task:
    """Build the task a spec describes; TaskError names what is wrong."""
    if spec.name.startswith("gym:"):
        task: Task = ReasoningGymTask(spec.name[4:], seed=spec.seed, **spec.params)
    elif spec.environment is not None:
        key = spec.environment.model_dump_json()
        with _ENVIRONMENT_LOCK:  # one dataset listing and one scoring child per process
            if key not in _ENVIRONMENT_TASKS:
                _ENVIRONMENT_TASKS[key] = EnvironmentTask(spec.environment)
            task = _ENVIRONMENT_TASKS[key]
    elif spec.name in _FACTORIES:
        try:
            task = _FACTORIES[spec.name](spec.seed, **spec.params)
        except TypeError as exc:
            raise TaskError(f"bad parameters for task {spec.name!r}: {exc}") from exc
    else:
        raise TaskError(f"unknown task {spec.name!r}; known: {', '.join(task_names())}, gym:<name>, env")
    if spec.length_targets:
        task = LengthTargetTask(task, spec.length_targets, seed=spec.seed)
    if spec.subset:
        task = SubsetTask(task, registered_subset(spec.subset, spec.model_dump(mode="json")).kept)
    return task
