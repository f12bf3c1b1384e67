"""A pool's whole life on `geth --dev`, driven by the project's own commands (tests/e2e/test_geth*.py): the roles' keys
and environment, `devnet deploy` → `devnet mint` → `trainer init` → a shipped example pool config, and the shell steps
that train and pay. geth has no anvil RPCs: its clock moves only by waiting (1 s blocks), so every wait is on the
chain's state through the commands' own status output."""

from __future__ import annotations

import json
import os
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
from tests.support.shell import Budget, run_script

TOKENS = 10**18
ROLES = ("deployer", "owner", "trainer", "validator", "worker")
TEST_TIMEOUT_S = 3000
"""pytest-timeout of each geth test. Alone a test takes 200 s (permissioned) to 400 s (court); in `make test` the
first one started beside the heaviest modules and took 9× that on 2 cores, since the CPU is shared by process and
these tests run few."""
SCRIPTS_S = TEST_TIMEOUT_S - 300
"""All of a test's scripts together: what is left after them is for the logs and the assertions."""
POLL_S = 10
"""Seconds between two status commands in a wait: each starts a Python CLI (about 2 s of CPU), which the daemons
being waited on need more."""


@pytest.fixture(scope="module")
def geth(tmp_path_factory):
    binary = find_geth()
    if binary is None:
        pytest.skip("no geth: `make test` builds the pinned one with scripts/install_geth.sh (needs Go)")
    home = tmp_path_factory.mktemp("geth")
    node = start_geth(binary, home / "data", home / "geth.log")
    yield node
    node.stop()


class GethPool:
    """One test's pool on geth: the roles' dev keys (funded with geth's ETH), the environment the commands run in
    ($CHAIN: RPC, deployments file, chain id; $KUBO; $KEY_<ROLE>) and the test's budget for its scripts."""

    def __init__(self, geth, kubo_node, home: Path) -> None:
        self.geth, self.home, self.budget = geth, home, Budget(SCRIPTS_S)
        self.keys = dict(zip(ROLES, dev_accounts(len(ROLES)), strict=True))
        geth.fund([a.address for a in self.keys.values()], 1_000 * TOKENS)
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                    "PYTHONPATH": str(ROOT), "KUBO": kubo_node.api_multiaddr,
                    "CHAIN": f"--rpc-url {geth.rpc_url} --deployments deployments.json --chain-id {GETH_CHAIN_ID}",
                    **{f"KEY_{role.upper()}": "0x" + a.key.hex() for role, a in self.keys.items()}}
        self.env.pop("PROOFSWARM_DEVNET_DIR", None)

    def shell(self, script: str) -> str:
        """`script` in bash in the test's folder; its stdout, or the test fails with the output and the logs."""
        return run_script(script, self.home, self.env, self.budget.left()).check()

    def deploy_and_config(self, example: str, **overrides) -> None:
        """`devnet deploy` with the CLI's defaults, `devnet mint` to the roles that pay, `trainer init`, and the
        shipped example pool config with the policy's digests, the roles' addresses and `overrides` in `pool.toml`."""
        keys = self.keys
        self.shell(f"""
devnet deploy $CHAIN --key $KEY_DEPLOYER --unbonding-delay 3600
devnet mint $CHAIN --key $KEY_DEPLOYER {keys['owner'].address}=100000tokens {keys['worker'].address}=1000tokens \
  {keys['validator'].address}=1000tokens
""")
        init = json.loads(self.shell(f"trainer init --run-spec {ROOT / 'examples' / 'run.toml'} --kubo-api $KUBO "
                                     "--warm-steps 50 --json\n").strip().splitlines()[-1])
        pool = tomllib.loads((ROOT / "examples" / example).read_text())["pool"]
        court = pool.pop("court", None)
        pool |= {"trainer": keys["trainer"].address, "task": init["task"], "base_checkpoint": init["base_checkpoint"],
                 **overrides}
        if court is None:
            pool["validators"] = [keys["validator"].address]
        text = "[pool]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in pool.items())
        if court is not None:
            text += "[pool.court]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in court.items())
        (self.home / "pool.toml").write_text(text)

    def assert_paid(self) -> None:
        """The trainer stepped on the worker's final, accepted file, and the worker claimed its reward."""
        ledger = Ledger.open(self.geth.rpc_url, self.home / "deployments.json",
                             load_account("0x" + self.keys["owner"].key.hex()))
        assert ledger.w3.eth.chain_id == GETH_CHAIN_ID and "Geth" in ledger.w3.client_version
        state = pool_state(ledger, 1)
        assert state.latest_step == 1
        assert claimed_total(ledger, self.keys["worker"].address) == state.max_samples_per_work * state.reward_per_sample


TRAIN_AND_CLAIM = f"""
trainer start --pool 1 $CHAIN --key $KEY_TRAINER --kubo-api $KUBO --set batch_samples=16 --set max_steps=1 \
  --set wait_timeout_s={SCRIPTS_S} > trainer.log 2>&1 &
TRAINER=$!
worker start --pool 1 $CHAIN --key $KEY_WORKER --kubo-api $KUBO --work-dir worker --max-submissions 1 --quiet
wait $TRAINER
kill $VALIDATOR
pool status 1 $CHAIN --key $KEY_OWNER --json | grep -q '"latest_step": 1'
UNLOCK=$(worker status --pool 1 $CHAIN --key $KEY_WORKER --json | python -c \
  'import json, sys; print(json.load(sys.stdin)["rewards_claimable_at"] or 0)')
NOW=$(date +%s); if [ "$UNLOCK" -gt "$NOW" ]; then sleep $((UNLOCK - NOW)); fi
until worker status --pool 1 $CHAIN --key $KEY_WORKER --json | grep -q '"rewards_claimable": "[1-9]'; do sleep {POLL_S}; done
worker claim --pool 1 $CHAIN --key $KEY_WORKER
"""
"""A worker's file accepted and final, the trainer's step on it, and the worker paid. Follows the pool's `validator start … &`,
its PID in $VALIDATOR. The trainer ends after its one step: a trainer that gave up (or failed) ends the script at once, with its log,
instead of a wait that never ends. Its wait for work is the test's whole budget, since on a loaded machine the
worker's file comes late. The validator has judged the one file by then (the trainer steps only on final work), so
it stops; the claim sleeps until the reward lock's end that `worker status` names — geth's clock is this machine's —
instead of starting a status command (about 2 s of CPU) every few seconds through the lock.
"""
