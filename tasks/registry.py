"""The task registry: a TaskSpec (name, seed, parameters) builds the same Task everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from tasks.base import Task, TaskError
from tasks.datasets import JsonlTask, ReasoningGymTask
from tasks.difficulty import SubsetTask, registered_subset
from tasks.length import LengthTargetTask
from tasks.procedural import SOLVERS, DigitTask


class TaskSpec(BaseModel):
    """How to build a task: `rev`, `copy`, `sort`, `sum`, `jsonl` (params: path),
    or `gym:<reasoning-gym dataset>`; optional length targets wrap any of them, and an
    optional difficulty subset (tasks.difficulty) keeps only the train problems it lists."""

    name: str = "rev"
    seed: int = 0
    params: dict[str, Any] = Field(default_factory=dict)
    length_targets: tuple[int, ...] = ()
    subset: str | None = Field(None, pattern=r"^0x[0-9a-f]{64}$",
                               description="digest of a difficulty subset file on IPFS")


def _digit_factory(name: str) -> Callable[..., Task]:
    return lambda seed, **params: DigitTask(name, SOLVERS[name], seed=seed, **params)


_FACTORIES: dict[str, Callable[..., Task]] = {name: _digit_factory(name) for name in SOLVERS}
_FACTORIES["jsonl"] = lambda seed, **params: JsonlTask(**params)


def register_task(name: str, factory: Callable[..., Task]) -> None:
    """Add a task factory `factory(seed, **params) -> Task` under `name`."""
    if name in _FACTORIES or name.startswith("gym:"):
        raise TaskError(f"task name {name!r} is already taken")
    _FACTORIES[name] = factory


def task_names() -> list[str]:
    """Registered task names (reasoning-gym datasets are reached as gym:<name>)."""
    return sorted(_FACTORIES)


def build_task(spec: TaskSpec) -> Task:
    """Build the task a spec describes; TaskError names what is wrong."""
    if spec.name.startswith("gym:"):
        task: Task = ReasoningGymTask(spec.name[4:], seed=spec.seed, **spec.params)
    elif spec.name in _FACTORIES:
        try:
            task = _FACTORIES[spec.name](spec.seed, **spec.params)
        except TypeError as exc:
            raise TaskError(f"bad parameters for task {spec.name!r}: {exc}") from exc
    else:
        raise TaskError(f"unknown task {spec.name!r}; known: {', '.join(task_names())}, gym:<name>")
    if spec.length_targets:
        task = LengthTargetTask(task, spec.length_targets, seed=spec.seed)
    if spec.subset:
        task = SubsetTask(task, registered_subset(spec.subset, spec.model_dump(mode="json")).kept)
    return task
