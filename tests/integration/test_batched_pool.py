"""A permissioned pool that settles its files in batches (docs/protocol.md §3.1): `devnet deploy` deploys WorkBatches
(a slasher of its own) and `pool create` with a `[pool.batches]` table configures and funds it; R1.25 is refused before
any transaction. Real anvil, real Kubo, the commands' own `main`s."""

from __future__ import annotations

import json

from deploy.anvil import dev_accounts
from deploy.cli import main as devnet_main
from deploy.pool_cli import main as pool_main
from ledger_client.chain.ledger import Ledger, connect, load_deployment
from ledger_client.ipfs.kubo import KuboClient
from tests.integration.test_forced_errors_pool import _pool_toml

E18 = 10**18


def test_devnet_deploy_and_pool_create_leave_batches_configured(anvil, kubo_node, tmp_path, capsys):
    accounts = dev_accounts(10)
    deployments = tmp_path / "deployments.json"
    chain = ["--rpc-url", anvil.rpc_url, "--deployments", str(deployments)]
    assert devnet_main(["deploy", *chain, "--key", accounts[0].key.to_0x_hex(), "--json"]) == 0
    capsys.readouterr()
    deployment = load_deployment(deployments, 31337)
    admin = Ledger(connect(anvil.rpc_url, 31337), deployment, accounts[0])
    wb = admin.batches
    assert wb is not None and wb.pools() == deployment.compute_pool
    assert admin.stake.has_role(admin.stake.slasher_role(), wb.address)  # it locks and slashes workers' bonds itself
    admin.token.mint(accounts[1].address, 10**6 * E18)
    with KuboClient(kubo_node.api_multiaddr) as kubo:
        batched = _pool_toml(tmp_path, "pool-batches.toml", accounts, kubo)
    batched.write_text(batched.read_text().replace('"@validator"', f'"{accounts[3].address}"'))
    owner = ["--key", accounts[1].key.to_0x_hex(), "--kubo-api", kubo_node.api_multiaddr, "--json"]

    assert pool_main(["create", "--config", str(batched), *chain, *owner]) == 0
    created = json.loads(capsys.readouterr().out)
    pool_id = created["pool_id"]
    assert wb.get_params(pool_id)._asdict() == {"epoch_length": 600, "max_leaves": 16, "worker_bond": 2400 * E18}
    assert wb.budget(pool_id) == 10_000 * E18 and wb.genesis_of(pool_id) > 0
    assert created["batches"] == f"WorkBatches {wb.address}" and int(created["batches_budget"]) == 10_000 * E18

    pools = admin.pool.pool_count()  # R1.25 refused before any transaction: one line naming the rule
    batched.write_text(batched.read_text().replace('worker_bond = "2400e18"', 'worker_bond = "2399e18"'))
    assert pool_main(["create", "--config", str(batched), *chain, *owner]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: batches: worker_bond") and "R1.25" in err[0]
    assert admin.pool.pool_count() == pools
