"""`devnet`, `pool` and the demo as a user runs them: real processes, real anvil and Kubo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=180,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def assert_one_line_error(proc: subprocess.CompletedProcess, needle: str, code: int | None = None) -> None:
    assert proc.returncode != 0
    if code is not None:
        assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr


@pytest.fixture
def devnet_dir(tmp_path, kubo_node):  # kubo_node: skips unless a real Kubo is installed
    state = tmp_path / "devnet"
    yield state
    run("deploy.cli", "down", "--state-dir", str(state), cwd=tmp_path, ok=False)


def test_devnet_up_is_idempotent_and_down_stops_it(devnet_dir, tmp_path):
    first = json.loads(run("deploy.cli", "up", "--state-dir", str(devnet_dir), "--json", cwd=tmp_path).stdout)
    again = json.loads(run("deploy.cli", "up", "--state-dir", str(devnet_dir), "--json", cwd=tmp_path).stdout)
    assert first["started"] and not again["started"] and again["rpc_url"] == first["rpc_url"]
    status = json.loads(run("deploy.cli", "status", "--state-dir", str(devnet_dir), "--json", cwd=tmp_path).stdout)
    assert status["up"] and status["contracts_deployed"] and status["kubo_version"] == "0.42.0"
    deployments = json.loads((devnet_dir / "deployments.json").read_text())
    assert deployments["31337"]["compute_pool"] == first["contracts"]["compute_pool"]
    run("deploy.cli", "down", "--state-dir", str(devnet_dir), cwd=tmp_path)
    assert not (devnet_dir / "devnet.json").exists() and not (devnet_dir / "deployments.json").exists()
    down = run("deploy.cli", "status", "--state-dir", str(devnet_dir), "--json", cwd=tmp_path, ok=False)
    assert down.returncode == 1 and json.loads(down.stdout) == {"up": False}


def test_pool_commands_and_their_refusals(devnet_dir, tmp_path):
    run("deploy.cli", "up", "--state-dir", str(devnet_dir), cwd=tmp_path)
    chain = ["--devnet-dir", str(devnet_dir)]
    created = json.loads(run("deploy.pool_cli", "create", "--config", str(ROOT / "examples/pool.toml"), "--json",
                             *chain, cwd=tmp_path).stdout)
    pool_id = str(created["pool_id"])
    assert (created["spot_check_bps"], created["checked_per_file"]) == (10_000, "64 of 64")
    assert created["detection_probability_1_fabricated"] == 1.0 and created["break_even_slash"] == 1
    status = json.loads(run("deploy.pool_cli", "status", pool_id, "--json", *chain, cwd=tmp_path).stdout)
    assert status["status"] == "active" and status["budget"] == str(10_000 * 10**18)  # amounts as decimal strings
    funded = json.loads(run("deploy.pool_cli", "fund", pool_id, "5e18", "--json", *chain, cwd=tmp_path).stdout)
    assert funded["budget"] == str(10_005 * 10**18)

    bad = tmp_path / "bad.toml"
    bad.write_text("[pool]\ntrainer = '@trainer'\n")
    assert_one_line_error(run("deploy.pool_cli", "create", "--config", str(bad), *chain, cwd=tmp_path, ok=False),
                          "invalid configuration", 2)
    bad.write_text("[pool\n")
    assert_one_line_error(run("deploy.pool_cli", "create", "--config", str(bad), *chain, cwd=tmp_path, ok=False),
                          "not valid TOML", 2)
    bad.write_text((ROOT / "examples/pool.toml").read_text().replace("reward_lock_s = 120", "reward_lock_s = 5"))
    assert_one_line_error(run("deploy.pool_cli", "create", "--config", str(bad), *chain, cwd=tmp_path, ok=False),
                          "reward_lock_s must be", 2)
    pool_toml = (ROOT / "examples/pool.toml").read_text()
    for edit, needle in ((("reward_lock_s = 120", "reward_lock_s = 60"), "reward_lock_s must be > challenge_window_s"),
                         (("bounty_bps = 2000", "bounty_bps = 5001"), "bounty_bps"),
                         (("max_samples_per_work = 64", ""), "max_samples_per_work is required"),
                         # q = 5 %: one fabricated completion of 64 is caught with P = 4/64; S must be ≥ 19 × 64e18
                         (("funding =", "spot_check_bps = 500\nfunding ="),
                          "slash_amount 50000000000000000000 is below 1216000000000000000000, the least at which"),
                         (("funding =", "spot_check_bps = 0\nfunding ="), "spot_check_bps")):
        bad.write_text(pool_toml.replace(*edit))
        assert_one_line_error(run("deploy.pool_cli", "create", "--config", str(bad), *chain, cwd=tmp_path, ok=False),
                              needle, 2)
    court_toml = (ROOT / "examples/pool-court.toml").read_text()
    for edit, needle in ((("committee_size = 3", "committee_size = 1"), "committee_size"),
                         (("assigned_window_s = 10", "assigned_window_s = 1"), "court assigned_window_s is 1 s, below"),
                         (("challenge_window_s = 300", "challenge_window_s = 200"), "must fit in challenge_window_s (200)"),
                         (('wrong_verdict_slash = "60e18"', 'wrong_verdict_slash = "1e18"'), "wrong_verdict_slash")):
        bad.write_text(court_toml.replace(*edit))  # the court's bounds, refused before any transaction
        assert_one_line_error(run("deploy.pool_cli", "create", "--config", str(bad), *chain, cwd=tmp_path, ok=False),
                              needle, 2)
    bad.write_text(pool_toml.replace('funding = "10000e18"', 'funding = "1e40"'))  # more than the owner holds
    assert_one_line_error(run("deploy.pool_cli", "create", "--config", str(bad), *chain, cwd=tmp_path, ok=False),
                          "nothing was created", 2)
    assert_one_line_error(run("deploy.pool_cli", "status", str(int(pool_id) + 1), *chain, cwd=tmp_path, ok=False),
                          "UnknownPool")  # refused before the createPool transaction: no unfunded pool
    assert_one_line_error(run("deploy.pool_cli", "status", "99", *chain, cwd=tmp_path, ok=False), "UnknownPool")
    assert_one_line_error(run("deploy.pool_cli", "fund", pool_id, "1e40", *chain, cwd=tmp_path, ok=False),
                          "cannot fund")
    assert_one_line_error(run("deploy.pool_cli", "status", pool_id, "--chain-id", "1", *chain, cwd=tmp_path,
                              ok=False), "expected 1", 2)
    assert_one_line_error(run("deploy.pool_cli", "status", pool_id, "--rpc-url", "http://127.0.0.1:1", *chain,
                              cwd=tmp_path, ok=False), "cannot reach")
    worker_key = json.loads((devnet_dir / "devnet.json").read_text())["workers"][0]["private_key"]
    assert_one_line_error(run("deploy.pool_cli", "close", pool_id, "--key", worker_key, *chain, cwd=tmp_path,
                              ok=False), "NotPoolOwner")
    closed = json.loads(run("deploy.pool_cli", "close", pool_id, "--json", *chain, cwd=tmp_path).stdout)
    assert closed["refunded"] == str(10_005 * 10**18)
    assert_one_line_error(run("deploy.pool_cli", "close", pool_id, *chain, cwd=tmp_path, ok=False),
                          f"pool {pool_id} is already closed", 2)
    for command in (["claim", "--pool", "999"], ["deallocate", "--pool", "999"], ["unstake", "--leave", "999"]):
        assert_one_line_error(run("worker.cli", *command, "--devnet-worker", "0", *chain, cwd=tmp_path, ok=False),
                              "UnknownPool")  # was exit 0 with an empty result


def test_deploy_refuses_an_unbonding_delay_out_of_bounds(tmp_path):
    for delay in ("0", "3599", str(90 * 24 * 3600 + 1)):
        proc = run("deploy.cli", "deploy", "--rpc-url", "http://127.0.0.1:1", "--key", "0x" + "11" * 32,
                   "--unbonding-delay", delay, cwd=tmp_path, ok=False)
        assert_one_line_error(proc, "--unbonding-delay must be within [3600, 7776000]", 2)


def test_pool_without_devnet_is_a_clear_error(tmp_path):
    proc = run("deploy.pool_cli", "status", "1", "--devnet-dir", str(tmp_path / "none"), cwd=tmp_path, ok=False)
    assert_one_line_error(proc, "no devnet is up", 2)


def test_demo_slashes_once_and_pays_once(devnet_dir, tmp_path):
    out = tmp_path / "runs"
    run("examples.ledger_demo", "--state-dir", str(devnet_dir), "--out", str(out), "--down-after", cwd=tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chain_id"] == 31337 and summary["pool_id"] == 1
    assert len(summary["slashed"]) == 1 and len(summary["claimed"]) == 1
    assert summary["slashed"][0]["amount"] == summary["slash_amount"]
    assert summary["claimed"][0]["amount"] == 16 * summary["reward_per_sample"]
    assert summary["slashed"][0]["worker"] != summary["claimed"][0]["worker"]
    assert not (devnet_dir / "devnet.json").exists()  # --down-after stopped it


def test_the_chain_only_commands_start_without_torch(tmp_path):
    """`pool`, `devnet`, `explorer` and every role's `--help` and status commands load no torch (seconds of
    start-up): the role CLIs import their compute modules only when they generate, check or train."""
    modules = ["deploy.pool_cli", "deploy.cli", "dashboard.cli", "worker.cli", "validator.cli", "trainer.main"]
    code = f"import sys; [__import__(m) for m in {modules!r}]; print(*sorted({{'torch', 'transformers'}} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [], f"imported at start-up: {proc.stdout.strip()}"


def test_pool_create_refuses_a_submission_size_below_the_run_spec_before_any_transaction():
    from deploy.pool_cli import create_pool, load_pool_config
    from ledger_client.cli import UsageError
    from protocol.runspec import RunSpec, SamplingSpec

    devnet = {"roles": {"trainer": {"address": "0x" + "11" * 20}, "validator": {"address": "0x" + "22" * 20}}}
    cfg = load_pool_config(ROOT / "examples/pool.toml", devnet)  # max_samples_per_work = 64
    spec = RunSpec(task={"name": "rev"}, sampling=SamplingSpec(group_size=16), prompts_per_submission=8,
                   pool_seed="0x" + "ab" * 32)
    with pytest.raises(UsageError, match=r"max_samples_per_work \(64\) is below one submission of the run spec \(128"):
        create_pool(None, cfg, spec)  # type: ignore[arg-type]  # no ledger: refused before it is used
