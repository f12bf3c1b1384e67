"""`devnet`, `pool` and the demo as a user runs them: real processes, real anvil and Kubo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT


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
    from deploy.pools import create_pool, load_pool_config
    from cli.errors import UsageError
    from protocol.runspec import RunSpec, SamplingSpec

    devnet = {"roles": {"trainer": {"address": "0x" + "11" * 20}, "validator": {"address": "0x" + "22" * 20}}}
    digests = {"task": "0x" + "12" * 32, "base_checkpoint": "0x" + "34" * 32}
    cfg = load_pool_config(ROOT / "examples/pool.toml", devnet, digests).model_copy(update={"max_samples_per_work": 64})
    spec = RunSpec(task={"name": "rev"}, sampling=SamplingSpec(group_size=16), prompts_per_submission=8,
                   pool_seed="0x" + "ab" * 32)
    with pytest.raises(UsageError, match=r"max_samples_per_work \(64\) is below one submission of the run spec \(128"):
        create_pool(None, cfg, spec)  # type: ignore[arg-type]  # no ledger: refused before it is used
