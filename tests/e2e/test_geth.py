"""The protocol on a production Ethereum client (issue 47): the project's own commands — `devnet deploy`, `devnet
mint`, `trainer init`, `pool create`, `validator start`, `worker start`, `trainer start`, `worker claim` — run unchanged
against `geth --dev` (1 s blocks, no anvil RPCs: the chain's clock moves only by waiting, so every wait here is on the
chain's state through the commands' own status output), for a permissioned pool and for the shipped court pool on the
default deployment. The pinned geth is built by scripts/install_geth.sh (`make test` runs it); the tests skip, saying
so, only where none could be built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deploy.anvil import dev_accounts
from ledger_client.chain.keys import load_account
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import claimed_total, pool_state
from tests.support.geth import GETH_CHAIN_ID, find_geth, start_geth
from tests.support.paths import ROOT

TOKENS = 10**18
ROLES = ("deployer", "owner", "trainer", "validator", "worker")


@pytest.fixture(scope="module")
def geth(tmp_path_factory):
    binary = find_geth()
    if binary is None:
        pytest.skip("no geth: `make test` builds the pinned one with scripts/install_geth.sh (needs Go)")
    home = tmp_path_factory.mktemp("geth")
    node = start_geth(binary, home / "data", home / "geth.log")
    yield node
    node.stop()


def _shell(script: str, cwd: Path, env: dict[str, str], timeout: float) -> str:
    """Run `script` in bash (errexit, job control, every background job stopped at exit); its stdout, or the
    failure with the logs of the folder."""
    shell = subprocess.Popen(["bash", "-c", "set -em\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script],
                             cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        out, err = shell.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, 15)
        out, err = shell.communicate(timeout=60)
    logs = "".join(f"\n--- {log.name}\n{log.read_text()[-3000:]}" for log in cwd.glob("*.log"))
    assert shell.returncode == 0, out[-4000:] + err[-4000:] + logs
    assert "Traceback" not in err + logs, err + logs
    return out


def _roles_env(geth, kubo_node) -> tuple[dict, dict[str, str]]:
    """The roles' dev keys (funded with geth's ETH) and the environment the commands run in: $CHAIN (RPC,
    deployments file, chain id), $KUBO and $KEY_<ROLE>."""
    keys = dict(zip(ROLES, dev_accounts(len(ROLES)), strict=True))
    geth.fund([a.address for a in keys.values()], 1_000 * TOKENS)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "KUBO": kubo_node.api_multiaddr,
           "CHAIN": f"--rpc-url {geth.rpc_url} --deployments deployments.json --chain-id {GETH_CHAIN_ID}",
           **{f"KEY_{role.upper()}": "0x" + account.key.hex() for role, account in keys.items()}}
    env.pop("PROOFSWARM_DEVNET_DIR", None)
    return keys, env


def _deploy_and_config(example: str, keys: dict, env: dict[str, str], home: Path) -> None:
    """`devnet deploy` with the CLI's defaults, `devnet mint` to the roles that pay, `trainer init`, and the shipped
    example pool config with the policy's digests and the roles' addresses in `home/pool.toml`."""
    _shell(f"""
devnet deploy $CHAIN --key $KEY_DEPLOYER --unbonding-delay 3600
devnet mint $CHAIN --key $KEY_DEPLOYER {keys['owner'].address}=100000tokens {keys['worker'].address}=1000tokens \
  {keys['validator'].address}=1000tokens
""", home, env, TIMEOUT_S)
    init = json.loads(_shell(f"trainer init --run-spec {ROOT / 'examples' / 'run.toml'} --kubo-api $KUBO "
                             "--warm-steps 50 --json\n", home, env, TIMEOUT_S).strip().splitlines()[-1])
    pool = tomllib.loads((ROOT / "examples" / example).read_text())["pool"]
    court = pool.pop("court", None)
    pool |= {"trainer": keys["trainer"].address, "task": init["task"], "base_checkpoint": init["base_checkpoint"]}
    if court is None:
        pool["validators"] = [keys["validator"].address]
    text = "[pool]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in pool.items())
    if court is not None:
        text += "[pool.court]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in court.items())
    (home / "pool.toml").write_text(text)


TRAIN_AND_CLAIM = """
trainer start --pool 1 $CHAIN --key $KEY_TRAINER --kubo-api $KUBO --set batch_samples=16 --set max_steps=1 \
  > trainer.log 2>&1 &
worker start --pool 1 $CHAIN --key $KEY_WORKER --kubo-api $KUBO --work-dir worker --max-submissions 1 --quiet
until pool status 1 $CHAIN --key $KEY_OWNER --json | grep -q '"latest_step": 1'; do sleep 2; done
until worker status --pool 1 $CHAIN --key $KEY_WORKER --json | grep -q '"rewards_claimable": "[1-9]'; do sleep 2; done
worker claim --pool 1 $CHAIN --key $KEY_WORKER
"""
"""A worker's file accepted and final, the trainer's step on it, and the worker paid: every wait on the commands'
own output of the chain's state."""
TIMEOUT_S = 1500
"""A pool's whole life on geth, alone: 4 (permissioned) to 8 (court) minutes; the windows pass in real time."""


def _paid(geth, keys: dict, home: Path) -> None:
    ledger = Ledger.open(geth.rpc_url, home / "deployments.json", load_account("0x" + keys["owner"].key.hex()))
    assert ledger.w3.eth.chain_id == GETH_CHAIN_ID and "Geth" in ledger.w3.client_version
    state = pool_state(ledger, 1)
    assert state.latest_step == 1  # the trainer stepped on the worker's final, accepted file
    assert claimed_total(ledger, keys["worker"].address) == state.max_samples_per_work * state.reward_per_sample


@pytest.mark.timeout(1800)
def test_a_permissioned_pool_goes_from_deploy_to_a_training_step_and_a_paid_worker_on_geth(geth, kubo_node, tmp_path):
    keys, env = _roles_env(geth, kubo_node)
    _deploy_and_config("pool.toml", keys, env, tmp_path)
    _shell("""
pool create --config pool.toml $CHAIN --key $KEY_OWNER --kubo-api $KUBO
validator start --pool 1 $CHAIN --key $KEY_VALIDATOR --kubo-api $KUBO --state-dir validator > validator.log 2>&1 &
""" + TRAIN_AND_CLAIM, tmp_path, env, TIMEOUT_S)
    _paid(geth, keys, tmp_path)


@pytest.mark.timeout(1800)
def test_a_court_pool_from_the_shipped_example_runs_on_geth_with_the_default_deployment(geth, kubo_node, tmp_path):
    """examples/pool-court.toml as shipped, on `devnet deploy`'s default court (minimum period 36 s): a bonded
    validator registers, is drawn once its activation delay has passed on the chain, and judges the worker's file."""
    keys, env = _roles_env(geth, kubo_node)
    _deploy_and_config("pool-court.toml", keys, env, tmp_path)
    out = _shell("""
pool create --config pool.toml $CHAIN --key $KEY_OWNER --kubo-api $KUBO
validator start --pool 1 $CHAIN --key $KEY_VALIDATOR --kubo-api $KUBO --state-dir validator > validator.log 2>&1 &
until validator status --pool 1 $CHAIN --key $KEY_VALIDATOR --json | grep -q '"active": true'; do sleep 2; done
""" + TRAIN_AND_CLAIM + """
validator status --pool 1 $CHAIN --key $KEY_VALIDATOR --json
""", tmp_path, env, TIMEOUT_S)
    assert "judged_by" in out and "ValidatorCourt" in out  # pool create names the court that judges the pool
    status = json.loads(out[out.rindex('{\n  "validator"'):])
    assert status["verdicts"] == 1 and status["verdicts_attested"] == 1 and status["verdicts_final"] == 1
    _paid(geth, keys, tmp_path)
