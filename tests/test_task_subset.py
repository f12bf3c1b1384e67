"""A difficulty subset travels through real Kubo: published once, named by digest in the run
spec's task, fetched and checked by every participant before it builds the task."""

import pytest

import tasks.difficulty
from ledger_client.ipfs.task_subset import fetch_task_subset, publish_task_subset
from protocol.runspec import RunSpec
from tasks import TaskError, TaskSpec, build_task
from tasks.base import assignment_space
from tasks.difficulty import difficulty_subset


def test_a_subset_named_in_the_run_spec_is_fetched_and_used(kubo, monkeypatch):
    monkeypatch.setattr(tasks.difficulty, "_REGISTERED", {})
    spec = TaskSpec(name="rev", params={"min_digits": 3, "max_digits": 3}, length_targets=(4,))
    task = build_task(spec)
    keep = {task.problem(i).prompt for i in (1, 3, 4)}
    attempt = {"n": 0}

    def sample(prompts):  # problems 1, 3, 4 solved every other attempt, the rest always
        attempt["n"] += 1
        return [p.split(":")[1][:3][::-1] if p not in keep or attempt["n"] % 2 else "x"
                for p in prompts]

    subset = difficulty_subset(task, spec.model_dump(mode="json"), 6, sample, attempts=4)
    assert subset.kept == [1, 3, 4]
    digest = publish_task_subset(kubo, subset)
    assert digest == subset.digest
    run_spec = RunSpec(task={**spec.model_dump(mode="json"), "subset": digest}, pool_seed="0x" + "00" * 32)
    named = TaskSpec.model_validate(run_spec.task)
    with pytest.raises(TaskError, match="not fetched"):
        build_task(named)

    fetch_task_subset(kubo, run_spec.task)  # what worker, validator and trainer do after fetching the spec
    filtered = build_task(named)
    assert assignment_space(filtered) == 3
    assert [filtered.problem(i).prompt for i in range(3)] == [task.problem(i).prompt for i in (1, 3, 4)]
