"""Environments from `verifiers` as Tasks: a run spec names a single-turn environment by package and version.

A `verifiers` environment is an installed package exporting a `Taskset` (its dataset: tasks with a prompt)
whose tasks carry `@vf.reward` functions (its rubric). Worker, validator and trainer build the same
`EnvironmentTask` from the run spec's `[task.environment]` table and refuse to start (TaskError, one line) when

- the installed environment package's version, or the installed `verifiers`' version, is not the one the run
  spec pins (`importlib.metadata`, before anything of the environment is imported);
- the environment is not single-turn and offline: it exports its own `Env` class, has tool servers, needs a
  container or a runtime for a reward, has judges (a judge model), holds a model-API or HTTP client, plugs a
  reward or metric from outside its own package, its dataset is infinite, or a prompt is more than one user
  turn (an optional system prompt, then the user's);
- loading it or scoring the probe completions touched the network, or the probe completions scored differently
  twice (tasks/_scorer_child.py: `_probe`);
- its dataset's rows, or its package's files, are not the ones the run spec pins (`dataset`, `source`: sha256
  digests that `trainer init` fills in).

Everything of the environment runs in a scoring child (tasks.sandbox, the same process model, budgets and
lock-down as the math and reasoning-gym scorers) whose sockets refuse to connect and resolve names, in an empty
network namespace where the kernel lets it make one. The parent never imports verifiers: it gets the dataset
from the child once and a reward per completion.

The reward of a completion is the rubric's total, `Trace.reward` (the weighted sum of the task's rewards, a
float64 computed by Python's IEEE arithmetic), rounded once to float32 (tasks.rewards.canonical_reward of the
float64's exact value). A rubric that raises, returns a non-finite value, exceeds the scoring budget or
touches the network scores `UNSCORABLE`. docs/protocol.md ("Rewards from verifiers environments") states
the rules and what the checks can and cannot detect.
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction
from importlib import metadata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.base import Problem, Split, Task, TaskError, in_test_split
from tasks.rewards import UNSCORABLE, canonical_reward
from tasks.sandbox import ScoringSandbox
from tasks.verify import MAX_COMPLETION_CHARS

VERIFIERS_VERSION = "0.4.0"
"""The `verifiers` release this code drives (pinned by the `envs` extra); a run spec names it too."""


class EnvironmentSpec(BaseModel):
    """A `verifiers` environment, as a run spec names it (`[task.environment]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package: str = Field(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$",
                         description="the environment's distribution name, also its verifiers taskset id")
    version: str = Field(min_length=1, description="the environment package's version every party must have")
    verifiers: str = Field(VERIFIERS_VERSION, min_length=1, description="the verifiers version every party must have")
    args: dict[str, Any] = Field(default_factory=dict, description="the taskset's config (its TasksetConfig fields)")
    test_fraction: float = Field(0.1, ge=0, lt=1, description=(
        "the held-out share of the dataset: the rows whose prompt hash falls below it (tasks.base.in_test_split)"))
    dataset: str | None = Field(None, pattern=r"^0x[0-9a-f]{64}$", description=(
        "sha256 of the dataset's rows (dataset_digest): a party whose environment builds other rows refuses to start; "
        "`trainer init` fills it in"))
    source: str | None = Field(None, pattern=r"^0x[0-9a-f]{64}$", description=(
        "sha256 of the environment package's files as the scoring child imported them (tasks/_scorer_child.py: "
        "_source_digest): a party with other code under the same version refuses to start; `trainer init` fills it in"))

    def child_config(self) -> dict[str, Any]:
        """What the scoring child loads: the package, from the sys.path entry this process found it in, with
        the versions it must have there too, and the taskset arguments."""
        return {"package": self.package, "version": self.version, "verifiers": self.verifiers, "args": self.args,
                "location": installed_location(self.package)}


def installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def installed_location(package: str) -> str | None:
    """The sys.path entry the package's distribution metadata was found in (the child imports it from there)."""
    try:
        return str(metadata.distribution(package).locate_file(""))
    except metadata.PackageNotFoundError:
        return None


def check_installed(spec: EnvironmentSpec) -> None:
    """TaskError unless the installed verifiers and environment package have the versions the spec pins."""
    for package, pinned in (("verifiers", spec.verifiers), (spec.package, spec.version)):
        found = installed_version(package)
        if found is None:
            extra = " (make install installs the project's `envs` extra)" if package == "verifiers" else ""
            raise TaskError(f"the run spec's environment needs {package}=={pinned}, which is not installed{extra}")
        if found != pinned:
            raise TaskError(f"the run spec's environment pins {package}=={pinned} but {found} is installed; "
                            f"install {package}=={pinned}")
    if spec.verifiers != VERIFIERS_VERSION:
        raise TaskError(f"this proofswarm drives verifiers {VERIFIERS_VERSION}, the run spec pins {spec.verifiers}")


def dataset_digest(rows: list) -> str:
    """sha256 of the rows [[prompt, answer], …] in dataset order, as compact UTF-8 JSON: what `dataset` pins."""
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return "0x" + hashlib.sha256(text.encode("utf-8")).hexdigest()


FLOAT32_MAX = 3.4028234663852886e38
"""A rubric total beyond float32's range has no reward value: it scores UNSCORABLE."""

_SANDBOXES: dict[str, ScoringSandbox] = {}


def environment_sandbox(spec: EnvironmentSpec) -> ScoringSandbox:
    """The process-wide scoring child of this environment (started by the caller's first request)."""
    config = spec.child_config()
    key = json.dumps(config, sort_keys=True)
    if key not in _SANDBOXES:
        _SANDBOXES[key] = ScoringSandbox(("env",), environment=config)
    return _SANDBOXES[key]


class EnvironmentTask(Task):
    """A single-turn verifiers environment: its dataset's prompts, its rubric as the reward (module docstring).

    Problem.answer is the task data's `answer` field when it has one (the supervised warm start's target;
    the reward never reads it), else the empty string. "Solved" (`is_correct`) means a total reward ≥ 1.
    """

    def __init__(self, spec: EnvironmentSpec) -> None:
        check_installed(spec)
        self.spec = spec
        self.name = f"env:{spec.package}"
        self._sandbox = environment_sandbox(spec)
        reply = self._sandbox.request({"op": "env-dataset"})
        if not reply.get("ok"):
            raise TaskError(f"{self.name}: the scoring sandbox could not list the dataset ({reply.get('why')})")
        self.source_digest = str(reply["source"])
        if spec.source is not None and spec.source != self.source_digest:
            raise TaskError(f"{self.name}: the package's files here ({self.source_digest[:14]}…) are not the ones the run "
                            f"spec pins ({spec.source[:14]}…): {spec.package} {spec.version} was changed on this machine")
        self.dataset_digest = dataset_digest(reply["rows"])
        if spec.dataset is not None and spec.dataset != self.dataset_digest:
            raise TaskError(f"{self.name}: the dataset built here ({self.dataset_digest[:14]}…) is not the one the run "
                            f"spec pins ({spec.dataset[:14]}…): the environment makes other rows on this machine")
        self._splits: dict[str, list[tuple[int, str, str]]] = {"train": [], "test": []}
        for row, (prompt, answer) in enumerate(reply["rows"]):
            test = spec.test_fraction > 0 and in_test_split(prompt, spec.test_fraction)
            self._splits["test" if test else "train"].append((row, prompt, answer))
        if not self._splits["train"]:
            raise TaskError(f"{self.name}: the environment's dataset has no training problems")

    def size(self, split: Split = "train") -> int:
        return len(self._splits[split])

    def problem(self, index: int, split: Split = "train") -> Problem:
        rows = self._splits[split]
        if not 0 <= index < len(rows):
            raise TaskError(f"{self.name}: {split} index {index} out of range [0, {len(rows)})")
        row, prompt, answer = rows[index]
        return Problem(index=index, prompt=prompt, answer=answer, metadata={"env_row": row})

    def rubric_score(self, problem: Problem, completion: str) -> float | None:
        """The rubric's total for the completion (a float64), or None when it cannot be scored."""
        if len(completion) > MAX_COMPLETION_CHARS:
            return None
        reply = self._sandbox.request({"op": "env", "row": problem.metadata["env_row"], "completion": completion})
        if not reply.get("ok"):
            return None
        try:
            value = float.fromhex(reply["reward"])
        except (KeyError, TypeError, ValueError):
            return None
        return value if math.isfinite(value) and abs(value) <= FLOAT32_MAX else None

    def reward(self, problem: Problem, completion: str, completion_tokens: int) -> float:
        value = self.rubric_score(problem, completion)
        return UNSCORABLE if value is None else canonical_reward(Fraction(value))

    def is_correct(self, problem: Problem, completion: str) -> bool:
        return self.reward(problem, completion, len(completion)) >= 1.0

    def close(self) -> None:
        """Stop the scoring child (a later reward starts a new one): for a process that only checked the task."""
        self._sandbox.close()
