"""The local devnet: anvil + one Kubo daemon + the deployed contracts, with state in one folder.

`up` is idempotent (a running devnet is reported, not restarted) and atomic (on failure it stops
what it started and leaves no devnet.json or deployments file behind). `down` stops only the
processes whose pids `up` recorded, after checking they are still anvil / our Kubo daemon.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from cli.devnet import DEV_CHAIN_ID, devnet_file, load_devnet_info
from cli.errors import UsageError
from deploy.anvil import dev_accounts, pid_is, start_anvil, stop_pid
from deploy.contracts import deploy_contracts
from deploy.kubo_node import KuboNode, stop_daemon
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.ipfs.kubo import KuboClient

# Roles of the dev accounts (indices into the dev mnemonic's accounts).
ROLES = {"deployer": 0, "pool_owner": 1, "trainer": 2, "validator": 3, "treasury": 9}
WORKER_ACCOUNTS = [4, 5, 6, 7, 8]
DEV_TOKENS_PER_ACCOUNT = 1_000_000 * 10**18
UNBONDING_DELAY_S = 3600


def is_running(info: dict) -> bool:
    return pid_is(info["anvil_pid"], "anvil") and (Path(info["kubo_repo"]) / "proofswarm-daemon.pid").exists()


def up(state_dir: Path) -> tuple[dict, bool]:
    """Start the devnet in `state_dir`; returns (info, started_now)."""
    state_dir = state_dir.resolve()
    info = load_devnet_info(state_dir)
    if info is not None:
        if is_running(info):
            return info, False
        down(state_dir)  # stale: a previous devnet died; clear what is left
    state_dir.mkdir(parents=True, exist_ok=True)
    anvil = kubo = None
    deployments = state_dir / "deployments.json"
    try:
        # a block every second besides one per transaction: chain time moves while nobody sends anything, so
        # windows (challenge, court, spot-check draws on block B + 1) pass on an idle devnet as on a real chain
        anvil = start_anvil(state_dir / "anvil.log", extra_args=["--block-time", "1", "--mixed-mining"])
        kubo = KuboNode.start(state_dir / "kubo")
        w3 = connect(anvil.rpc_url, DEV_CHAIN_ID)
        accounts = dev_accounts(10)
        deployment = deploy_contracts(w3, accounts[0], treasury=accounts[ROLES["treasury"]].address,
                                      unbonding_delay=UNBONDING_DELAY_S)
        admin = Ledger(w3, deployment, accounts[0])
        for i in [ROLES["pool_owner"], ROLES["validator"], *WORKER_ACCOUNTS]:  # validators bond in court pools
            admin.token.mint(accounts[i].address, DEV_TOKENS_PER_ACCOUNT)
        save_deployment(deployments, deployment)
        info = {
            "chain_id": DEV_CHAIN_ID,
            "rpc_url": anvil.rpc_url,
            "anvil_pid": anvil.pid,
            "kubo_api": kubo.api_multiaddr,
            "kubo_api_url": kubo.api_url,
            "kubo_repo": str(kubo.repo),
            "kubo_swarm": kubo.swarm_multiaddrs,
            "deployments": str(deployments),
            "contracts": deployment.model_dump(),
            "roles": {role: {"index": i, "address": accounts[i].address, "private_key": accounts[i].key.to_0x_hex()}
                      for role, i in ROLES.items()},
            "workers": [{"index": i, "address": accounts[i].address, "private_key": accounts[i].key.to_0x_hex()}
                        for i in WORKER_ACCOUNTS],
            "note": "dev keys of the public test mnemonic; never use them on a real chain",
        }
        tmp = state_dir / ".devnet.json.tmp"
        tmp.write_text(json.dumps(info, indent=2) + "\n")
        os.replace(tmp, devnet_file(state_dir))
        return info, True
    except BaseException:
        if kubo is not None:
            kubo.stop()
        if anvil is not None:
            anvil.stop()
        deployments.unlink(missing_ok=True)
        raise


def down(state_dir: Path) -> list[str]:
    """Stop what `up` started in `state_dir`; returns what was stopped."""
    state_dir = state_dir.resolve()
    info = load_devnet_info(state_dir)
    stopped = []
    if info is not None:
        if stop_pid(info["anvil_pid"], "anvil"):
            stopped.append(f"anvil (pid {info['anvil_pid']})")
        if stop_daemon(Path(info["kubo_repo"])):
            stopped.append("kubo")
    elif (state_dir / "kubo").exists() and stop_daemon(state_dir / "kubo"):
        stopped.append("kubo")
    devnet_file(state_dir).unlink(missing_ok=True)
    (state_dir / "deployments.json").unlink(missing_ok=True)
    # The chain is in memory, so its Kubo content is meaningless after a restart.
    shutil.rmtree(state_dir / "kubo", ignore_errors=True)
    return stopped


def advance(state_dir: Path, seconds: int) -> int:
    """Move the running devnet's chain time forward by `seconds` and mine a block; returns its timestamp."""
    info = load_devnet_info(state_dir.resolve())
    if info is None:
        raise UsageError("no devnet is up (run `devnet up`)")
    w3 = connect(info["rpc_url"], info["chain_id"])
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])
    return w3.eth.get_block("latest")["timestamp"]


def status(state_dir: Path) -> dict:
    """Reachability of the devnet's chain, Kubo and contracts."""
    info = load_devnet_info(state_dir.resolve())
    if info is None:
        return {"up": False}
    out: dict = {"up": is_running(info), "rpc_url": info["rpc_url"], "kubo_api_url": info["kubo_api_url"]}
    try:
        w3 = connect(info["rpc_url"], info["chain_id"], timeout=3)
        out["block"] = w3.eth.block_number
        out["contracts_deployed"] = all(w3.eth.get_code(a) for a in (info["contracts"]["compute_pool"],
                                                                    info["contracts"]["stake_manager"]))
    except Exception as exc:  # status reports, it does not fail
        out["rpc_error"] = str(exc)
    try:
        with KuboClient(info["kubo_api"], timeout=3) as kubo:
            out["kubo_version"] = kubo.version()
    except Exception as exc:
        out["kubo_error"] = str(exc)
    return out
