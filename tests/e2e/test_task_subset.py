"""A difficulty subset travels through real Kubo: published once, named by digest in the run
spec's task, fetched and checked by every participant before it builds the task."""

import threading

import pytest

import tasks.difficulty
from ledger_client.chain.queries import get_work
from ledger_client.ipfs.content import fetch_run_spec, publish_run_spec, put_object
from protocol.digest import Digest
from protocol.pool import WorkStatus
from protocol.rollouts import read_rollout_file
from protocol.runspec import RunSpec
from tasks import TaskError, TaskSpec, build_task
from tasks.base import assignment_space
from tasks.difficulty import difficulty_subset, registered_subset
from tests.support.protocol_pool import ProtocolPool


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
    digest = str(Digest(put_object(kubo, subset.to_bytes())))  # as `trainer init` publishes it
    assert digest == subset.digest
    run_spec = RunSpec(task={**spec.model_dump(mode="json"), "subset": digest}, pool_seed="0x" + "00" * 32)
    named = TaskSpec.model_validate(run_spec.task)
    with pytest.raises(TaskError, match="not fetched"):
        build_task(named)

    # what worker, validator and trainer do: fetching the spec fetches and registers the subset it names
    assert fetch_run_spec(kubo, publish_run_spec(kubo, run_spec)) == run_spec
    filtered = build_task(named)
    assert assignment_space(filtered) == 3
    assert [filtered.problem(i).prompt for i in range(3)] == [task.problem(i).prompt for i in (1, 3, 4)]


RUN_SPEC = """
prompts_per_submission = 2
pool_seed = "0x5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b"

[task]
name = "sort"
params = { min_digits = 3, max_digits = 3 }

[sampling]
group_size = 4
temperature = 1.0
max_tokens = 8

[verification]
toploc_min_exp_matches = 125
toploc_max_mant_err_mean = 0.03
toploc_max_mant_err_median = 0.0
toploc_mean_excludes_max = true
"""


@pytest.mark.timeout(900)  # a bound on a hang in a loaded `make test` (300 s was hit at load 15), never a pace
def test_trainer_init_filters_by_difficulty_and_worker_and_validator_use_the_subset(tmp_path, kubo_node):
    """`trainer init --difficulty-candidates` measures the base policy's pass rates once, publishes the kept band
    and names it in the run spec; a worker draws its prompts from that subset and the validator, rebuilding the
    assignment from the same subset, accepts the work (a worker outside the subset would be challenged)."""
    pool = ProtocolPool(tmp_path, kubo_node)
    try:
        spec_file = tmp_path / "run.toml"
        spec_file.write_text(RUN_SPEC)
        spec = pool.create_by_trainer_init(spec_file, "--warm-steps", "5", "--difficulty-candidates", "12",
                                           "--difficulty-attempts", "2", "--difficulty-band", "0", "1")
        assert pool.init_output["subset_size"] == 12 and spec.task.subset == pool.init_output["subset"]
        # the pool's spec came from fetch_run_spec, which registered the subset it names
        subset = registered_subset(spec.task.subset, spec.task.model_dump(mode="json"))
        assert subset.kept == list(range(12))
        unfiltered = build_task(spec.task.model_copy(update={"subset": None}))
        allowed = {unfiltered.problem(i).prompt for i in subset.kept}

        worker = pool.worker(4)
        assert worker.step_once(threading.Event())
        (entry,) = worker.journal.entries("submitted")
        batch = read_rollout_file(entry["file"])
        task = build_task(spec.task)
        assert {task.problem(s.prompt_index).prompt for s in batch.samples} <= allowed
        validator = pool.validator()
        try:
            assert validator.run_once() == 1
        finally:
            validator.close()
        assert get_work(pool.ledger(0), bytes.fromhex(entry["work_id"])).status == WorkStatus.ACCEPTED
    finally:
        pool.close()
