"""A pool whose task is a verifiers environment (environments/digit_sort, proofswarm-digit-sort 0.1.0), end to end
on a real anvil + Kubo: `trainer init` publishes the run spec naming the environment, two workers generate on its
prompts and report its rubric's rewards, the validator (its checkers in their own processes, each with its own
scoring child) recomputes them bit for bit and attests, `trainer start` trains a step on the accepted work, and a
worker's work on the step-1 checkpoint is accepted too. A pool whose run spec pins another version of the
environment: its worker and validator refuse to start, before any stake moves or any registration."""

from __future__ import annotations

import json
import signal
import threading

import pytest
import torch

pytest.importorskip("verifiers", reason="the `envs` extra (make install) brings verifiers")

from ledger_client.chain.queries import get_work, pool_state  # noqa: E402
from ledger_client.ipfs.content import publish_run_spec  # noqa: E402
from protocol.digest import Digest  # noqa: E402
from protocol.pool import WorkStatus  # noqa: E402
from protocol.runspec import TaskUnavailable  # noqa: E402
from tests.support.protocol_pool import ProtocolPool  # noqa: E402
from trainer.consumed_log import read_consumed  # noqa: E402
from trainer.main import main as trainer_main  # noqa: E402
from validator.cli import main as validator_main  # noqa: E402

RUN_SPEC = """
prompts_per_submission = 2
pool_seed = "0x5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"

[task]
name = "env"

[task.environment]  # a single-turn verifiers environment built in this repo (environments/digit_sort)
package = "proofswarm-digit-sort"
version = "0.1.0"
verifiers = "0.4.0"
args = { size = 300 }

[sampling]
group_size = 4
temperature = 1.0
max_tokens = 6

[verification]  # float32 reference and float32 workers
toploc_min_exp_matches = 125
toploc_max_mant_err_mean = 0.03
toploc_max_mant_err_median = 0.0
toploc_mean_excludes_max = true
"""


@pytest.fixture(autouse=True)
def _process_settings_restored():
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGTERM)
    yield
    torch.set_num_threads(threads)
    signal.signal(signal.SIGTERM, handler)


@pytest.fixture
def pool(tmp_path, kubo_node):
    p = ProtocolPool(tmp_path, kubo_node)
    yield p
    p.close()


@pytest.mark.timeout(900)  # a bound on a hang in a loaded `make test` (300 s was hit at load 15), never a pace
def test_a_pool_trains_on_a_verifiers_environment_end_to_end(pool, tmp_path, capsys):
    spec_file = tmp_path / "run.toml"
    spec_file.write_text(RUN_SPEC)
    spec = pool.create_by_trainer_init(spec_file, "--hidden", "32", "--layers", "1", "--heads", "2",
                                       "--warm-steps", "30", "--warm-lr", "3e-3")
    assert spec.task.environment.package == "proofswarm-digit-sort" and spec.task.environment.version == "0.1.0"
    assert spec.task.environment.dataset and spec.task.environment.source  # trainer init pinned the rows and code

    stop = threading.Event()
    workers = [pool.worker(4), pool.worker(5)]
    for worker in workers:
        assert worker.step_once(stop)
    submitted = [e for w in workers for e in w.journal.entries("submitted")]
    validator = pool.validator()
    try:
        assert validator.run_once() == 2
        assert [get_work(pool.ledger(0), bytes.fromhex(e["work_id"])).status for e in submitted] == \
            [WorkStatus.ACCEPTED] * 2  # the validator's own scoring child gave the same float32 rewards

        run_dir = tmp_path / "trainer"
        assert trainer_main(["start", "--pool", str(pool.pool_id), "--rpc-url", pool.anvil.rpc_url,
                             "--deployments", str(pool.deployments), "--key", pool.accounts[2].key.hex(),
                             "--kubo-api", pool.kubo_api, "--set", f"run_dir={run_dir}", "--set", "max_steps=1",
                             "--set", "batch_samples=4", "--set", "wait_timeout_s=20", "--json",
                             "--no-wait-final"]) == 0  # W is an hour; finality: test_trainer_finality.py
        consumed = json.loads((run_dir / "consumed.json").read_text())
        ids = read_consumed(run_dir / consumed["consumed_log"])
        assert consumed["step"] == 1 and 0 < consumed["consumed"] == len(ids)
        assert set(ids) <= {"0x" + e["work_id"] for e in submitted}
        assert pool_state(pool.ledger(0), pool.pool_id).latest_step == 1
        metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert any(row.get("reward") is not None for row in metrics)

        base = {k: v.clone() for k, v in workers[0].policy.model.state_dict().items()}
        # its next nonce was pinned to step 0 when it submitted; that submission pins the one after to step 1
        assert workers[0].step_once(stop) and workers[0].policy.step == 0
        assert validator.run_once() == 1
        assert workers[0].step_once(stop)  # on the step-1 checkpoint
        assert workers[0].policy.step == 1
        trained = workers[0].policy.model.state_dict()
        assert any(not torch.equal(trained[k], base[k]) for k in base)
        assert validator.run_once() == 1
    finally:
        validator.close()
    latest = workers[0].journal.entries("submitted")[-1]
    assert latest["step"] == 1 and get_work(pool.ledger(0), bytes.fromhex(latest["work_id"])).status == WorkStatus.ACCEPTED

    # the same environment pinned at a version this machine does not have: nobody starts, nothing moves
    other = spec.model_copy(update={"task": spec.task.model_copy(update={
        "environment": spec.task.environment.model_copy(update={"version": "0.2.0"})})})
    pool.create(other, publish_run_spec(pool.kubo, other), bytes(Digest.parse(pool.init_output["base_checkpoint"])))
    with pytest.raises(TaskUnavailable, match="pins proofswarm-digit-sort==0.2.0 but 0.1.0 is installed"):
        pool.worker(6)
    member = pool.ledger(6).pool.get_member(pool.pool_id, pool.accounts[6].address)
    assert member.allocation == 0 and not pool.ledger(6).pool.is_member(pool.pool_id, pool.accounts[6].address)
    assert validator_main(["start", "--pool", str(pool.pool_id), "--rpc-url", pool.anvil.rpc_url, "--deployments",
                           str(pool.deployments), "--key", pool.accounts[3].key.hex(), "--kubo-api", pool.kubo_api,
                           "--state-dir", str(tmp_path / "refusing-validator")]) == 2
    assert not (tmp_path / "refusing-validator").exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: the pool's task cannot run here: the run spec's environment pins proofswarm-digit-sort==0.2.0 but "
        "0.1.0 is installed; install proofswarm-digit-sort==0.2.0")
