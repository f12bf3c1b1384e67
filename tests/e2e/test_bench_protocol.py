"""bench.protocol's building blocks: the phase log, the recipe's run spec, the breakdown and the clocks."""

from __future__ import annotations

import argparse
import time

import torch

from bench.protocol import VariantResult, role_breakdown, run_spec_toml, summarise, summarise_runs, time_to_target
from examples.cpu_run import CpuRecipe, warm_policy
from protocol.phases import LOG_ENV, ROLE_ENV, phase, read_phases
from protocol.runspec import load_run_spec
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec


def test_phase_log_is_off_unless_its_env_var_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv(LOG_ENV, raising=False)
    with phase("generate"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_nested_phase_is_not_counted_twice(tmp_path, monkeypatch):
    log = tmp_path / "phases.jsonl"
    monkeypatch.setenv(LOG_ENV, str(log))
    monkeypatch.setenv(ROLE_ENV, "worker0")
    with phase("publish"):
        time.sleep(0.05)
        with phase("upload"):
            time.sleep(0.1)
    records = {r["phase"]: r for r in read_phases(log)}
    assert set(records) == {"publish", "upload"}
    assert all(r["role"] == "worker0" for r in records.values())
    assert records["upload"]["s"] >= 0.1
    assert 0.05 <= records["publish"]["s"] < 0.1  # its own time only, without the upload's


def test_the_rpc_census_counts_a_roles_requests_by_method_per_file(tmp_path, monkeypatch, anvil):
    from bench.protocol import rpc_per_file
    from ledger_client.chain.ledger import RPC_LOG_ENV, connect

    log = tmp_path / "rpc.jsonl"
    monkeypatch.delenv(RPC_LOG_ENV, raising=False)
    connect(anvil.rpc_url).eth.block_number  # off: nothing logged
    assert not log.exists()
    monkeypatch.setenv(RPC_LOG_ENV, str(log))
    monkeypatch.setenv(ROLE_ENV, "worker0")
    w3 = connect(anvil.rpc_url)
    for _ in range(4):
        w3.eth.block_number
    w3.eth.get_block("latest")
    w3.eth.chain_id  # cached after connect: not a request
    assert rpc_per_file(log, files=2) == {"worker0": {"total": 2.5, "eth_blockNumber": 2.0, "eth_getBlockByNumber": 0.5}}


def test_the_rpc_census_names_the_contract_function_of_a_call(tmp_path, monkeypatch, chain):
    from bench.protocol import rpc_per_file
    from ledger_client.chain.ledger import RPC_LOG_ENV, Ledger, connect

    log = tmp_path / "rpc.jsonl"
    monkeypatch.setenv(RPC_LOG_ENV, str(log))
    monkeypatch.setenv(ROLE_ENV, "validator0")
    ledger = Ledger(connect(chain.anvil.rpc_url), chain.deployment, chain.accounts[0])
    ledger.pool.get_pool(chain.pool_id)
    assert rpc_per_file(log, files=1)["validator0"]["eth_call ComputePool.getPool"] == 1.0


def test_the_pools_run_spec_is_the_cpu_recipes(tmp_path):
    spec = CpuRecipe()
    path = tmp_path / "run.toml"
    path.write_text(run_spec_toml(spec, 500))
    run = load_run_spec(path)
    assert run.task == spec.task
    assert run.sampling == spec.sampling
    assert run.prompts_per_submission == spec.prompts_per_file
    assert run.pool_seed_bytes == spec.pool_seed
    assert run.verification.spot_check_bps == 500


def test_trainer_init_warm_starts_the_same_policy_as_the_local_run(tmp_path):
    spec = CpuRecipe(warm_steps=3)
    path = tmp_path / "run.toml"
    path.write_text(run_spec_toml(spec, 10_000))
    pooled, _ = init_policy(load_run_spec(path), ModelSpec(), spec.warm_steps, spec.warm_lr, seed=0)
    local, _, _ = warm_policy(spec)
    for name, tensor in local.state_dict().items():
        torch.testing.assert_close(pooled.state_dict()[name], tensor)


def test_breakdown_groups_phases_and_calls_the_rest_idle():
    records = [
        {"role": "worker0", "phase": "generate", "t": 101.0, "s": 4.0},
        {"role": "worker0", "phase": "encode", "t": 105.0, "s": 0.5},
        {"role": "worker0", "phase": "upload", "t": 105.5, "s": 0.5},
        {"role": "worker0", "phase": "tx submitWork", "t": 106.0, "s": 0.2},
        {"role": "worker0", "phase": "tx allocate", "t": 106.2, "s": 0.3},
        {"role": "worker0", "phase": "block", "t": 106.5, "s": 0.5},
        {"role": "trainer", "phase": "train", "t": 103.0, "s": 2.0},
    ]
    rows = role_breakdown(records, {"worker0": 10.0, "trainer": 10.0}, launched_at=100.0)
    assert rows["worker0"] == {"generate": 4.0, "encode/upload": 1.0, "start-up": 1.0, "idle": 3.0,
                               "wait for a block": 0.5, "other tx": 0.3, "submit": 0.2}
    assert rows["trainer"] == {"idle": 5.0, "start-up": 3.0, "train": 2.0}


def test_time_to_target_leaves_every_evaluation_off_the_clock():
    spec = CpuRecipe(target=0.5, target_window=2)
    evals = [{"role": "trainer", "phase": "eval", "t": 100.0 + 10 * i, "s": 2.0} for i in range(4)]
    accuracies = [(0, 0.1), (5, 0.3), (10, 0.6), (15, 0.5)]
    # (0.6 + 0.5) / 2 ≥ 0.5 at the fourth evaluation, which starts at 130; three evaluations came before it
    assert time_to_target(evals, accuracies, spec, launched_at=95.0) == 130.0 - 95.0 - 6.0
    assert time_to_target(evals, accuracies, CpuRecipe(target=0.9, target_window=2), 95.0) is None


def test_a_missed_target_is_reported_as_a_lower_bound():
    args = argparse.Namespace(cores=2, workers=1, validators=1, audit_rate=0.0, max_pending=2, no_pace=False)
    local = VariantResult("local", 100.0, 400.0, 0.8, 100)
    protocols = {"protocol_q5": VariantResult("protocol_q5", 150.0, 600.0, 0.8, 100),
                 "protocol_q1": VariantResult("protocol_q1", None, 600.0, 0.4, 30)}
    out = summarise(local, protocols, CpuRecipe(), args)
    assert (out["local_s"], out["protocol_q5_s"], out["ratio_q5"]) == (100.0, 150.0, 1.5)
    assert (out["protocol_q1_s"], out["protocol_q1_min_s"], out["ratio_q1"], out["ratio_q1_min"]) == (None, 600.0, None, 6.0)
    assert set(out["breakdown"]) == {"local", "protocol_q5", "protocol_q1"}


def test_repeats_report_the_median_run_and_seconds_per_step():
    args = argparse.Namespace(cores=2, workers=1, validators=1, audit_rate=0.0, max_pending=8, no_pace=False)
    locals_ = [VariantResult("local", t, 400.0, 0.8, steps) for t, steps in ((60.0, 150), (150.0, 420), (45.0, 80))]
    protocols = [VariantResult("protocol_q5", t, 600.0, 0.8, steps) for t, steps in ((250.0, 280), (None, 500), (200.0, 236))]
    out = summarise_runs([(lo, {"protocol_q5": p}) for lo, p in zip(locals_, protocols)], CpuRecipe(), args)
    # medians: local 60 s (of 45, 60, 150), protocol 250 s (a missed target ranks after every reached one)
    assert (out["local_s"], out["protocol_q5_s"], out["ratio_q5"], out["repeats"]) == (60.0, 250.0, 4.17, 3)
    assert out["local_s_per_step"] == 0.4 and out["protocol_q5_s_per_step"] == round(250 / 280, 3)
    assert out["ratio_per_step_q5"] == round(round(250 / 280, 3) / 0.4, 2)
    assert [run["protocol_q5"]["time_to_target_s"] for run in out["runs"]] == [250.0, None, 200.0]


def test_a_short_protocol_run_reports_each_roles_phases(tmp_path, kubo_node):  # kubo_node: skips without Kubo
    from bench.protocol import Devnet, run_protocol

    spec = CpuRecipe(budget_s=20.0, eval_problems=20)
    with Devnet(tmp_path / "devnet") as info:
        # the run goes on until a verdict was sent: a loaded machine can be slower than 20 s to its first
        r = run_protocol(spec, tmp_path, info, tmp_path / "devnet", 500, workers=1, validators=1, audit_rate=0.0,
                         min_verdicts=1)
    assert r.name == "protocol_q5" and r.time_to_target_s is None  # 0.8 is out of reach in 20 s
    assert set(r.breakdown) == {"validator0", "trainer", "worker0"}
    assert {"generate", "prove", "encode/upload", "submit"} <= set(r.breakdown["worker0"])
    assert {"check", "verdict", "fetch"} <= set(r.breakdown["validator0"])
    assert r.details["latency"]["submitted"] > 0 and r.details["latency"]["verdicts"] > 0
    assert r.details["consumed_overturned"] == 0
