"""`devnet deploy` deploys ForcedErrors beside the court (a slasher of its own) and `pool create` of a court pool with a
`[pool.court.forced_errors]` table configures it and funds its verification budget; a court pool without the table
has none (docs/protocol.md §1.3, R9.25). Real anvil, real Kubo, the commands' own `main`s."""

from __future__ import annotations

import json
from pathlib import Path

from deploy.cli import main as devnet_main
from deploy.pool_cli import main as pool_main
from deploy.anvil import dev_accounts
from ledger_client.chain.ledger import Ledger, connect, load_deployment
from ledger_client.ipfs.content import publish_run_spec
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import hex_text
from protocol.runspec import load_run_spec
from tests.support.paths import ROOT
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest

E18 = 10**18


def _pool_toml(tmp_path: Path, example: str, accounts, kubo) -> Path:
    """The shipped example with the devnet's `@trainer` and `@init` written out (no devnet here)."""
    spec = load_run_spec(ROOT / "examples" / "run.toml")
    model, tokenizer = init_policy(spec, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
    base = base_checkpoint_digest(kubo, model.state_dict(), model.config, tokenizer)
    text = (ROOT / "examples" / example).read_text().replace('"@trainer"', f'"{accounts[2].address}"')
    text = text.replace('task = "@init"', f'task = "{hex_text(publish_run_spec(kubo, spec))}"')
    text = text.replace('base_checkpoint = "@init"', f'base_checkpoint = "{hex_text(base)}"')
    path = tmp_path / example
    path.write_text(text)
    return path


def test_devnet_deploy_and_pool_create_leave_forced_errors_configured(anvil, kubo_node, tmp_path, capsys):
    accounts = dev_accounts(10)
    deployments = tmp_path / "deployments.json"
    chain = ["--rpc-url", anvil.rpc_url, "--deployments", str(deployments)]
    assert devnet_main(["deploy", *chain, "--key", accounts[0].key.to_0x_hex(), "--json"]) == 0
    capsys.readouterr()
    w3 = connect(anvil.rpc_url, 31337)
    deployment = load_deployment(deployments, 31337)
    admin = Ledger(w3, deployment, accounts[0])
    fe = admin.forced_errors
    assert fe is not None and fe.court() == deployment.validator_court
    assert admin.stake.has_role(admin.stake.slasher_role(), fe.address)  # it locks and slashes chains' bonds itself
    admin.token.mint(accounts[1].address, 10**6 * E18)
    with KuboClient(kubo_node.api_multiaddr) as kubo:
        forced = _pool_toml(tmp_path, "pool-court-forced.toml", accounts, kubo)
        plain = _pool_toml(tmp_path, "pool-court.toml", accounts, kubo)
    owner = ["--key", accounts[1].key.to_0x_hex(), "--kubo-api", kubo_node.api_multiaddr, "--json"]

    assert pool_main(["create", "--config", str(forced), *chain, *owner]) == 0
    created = json.loads(capsys.readouterr().out)
    pool_id = created["pool_id"]
    params = fe.get_params(pool_id)
    assert params._asdict() == {"forced_bps": 200, "audit_bps": 5000, "epoch_length": 600, "reveal_window": 120,
                                "jackpot": 1000 * E18, "validator_bond": 200 * E18, "worker_bond": 200 * E18,
                                "silence_penalty": 10 * E18}
    assert fe.budget(pool_id) == 10_000 * E18 and fe.genesis(pool_id) > 0
    assert created["forced_errors"] == f"ForcedErrors {fe.address}" 
    # --json writes amounts as base-unit strings
    assert int(created["forced_errors_jackpot"]) == 1000 * E18 and int(created["forced_errors_budget"]) == 10_000 * E18
    assert int(created["forced_errors_epoch_length_s"]) == 600

    assert pool_main(["create", "--config", str(plain), *chain, *owner]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["forced_errors"] == "none" and fe.get_params(other["pool_id"]).forced_bps == 0

    # R1.22 refused before any transaction: one line naming the rule, no pool created
    pools = admin.pool.pool_count()
    forced.write_text(forced.read_text().replace('jackpot = "1000e18"', 'jackpot = "7000e18"'))
    assert pool_main(["create", "--config", str(forced), *chain, *owner]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: forced_errors: jackpot") and "R1.22" in err[0]
    assert admin.pool.pool_count() == pools
