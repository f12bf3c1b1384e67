"""`devnet mint ADDRESS=AMOUNT…`: the dev stake token given out by its owner, on a chain `devnet deploy` deployed to
(issue 47, finding 1: on a real client nothing but cast gave anyone tokens); any other token refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.errors import EXIT_USAGE
from deploy.cli import main as devnet_main
from deploy.contracts import deploy_contracts
from deploy.anvil import dev_accounts
from ledger_client.chain.ledger import Ledger, connect, save_deployment

TOKENS = 10**18


@pytest.fixture
def deployed(anvil, tmp_path: Path) -> tuple[str, Path, Ledger]:
    w3 = connect(anvil.rpc_url, 31337)
    deployment = deploy_contracts(w3, dev_accounts(1)[0])
    deployments = tmp_path / "deployments.json"
    save_deployment(deployments, deployment)
    return anvil.rpc_url, deployments, Ledger(w3, deployment)


def test_the_deployer_mints_dev_tokens_to_each_address_named(deployed, capsys: pytest.CaptureFixture[str]) -> None:
    rpc_url, deployments, ledger = deployed
    deployer, alice, bob = dev_accounts(3)
    on_chain = ["--rpc-url", rpc_url, "--deployments", str(deployments), "--key", deployer.key.to_0x_hex()]
    assert devnet_main(["mint", f"{alice.address}=1000tokens", f"{bob.address}=1.5ether", *on_chain]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"minted 1000 tokens to {alice.address}: it holds 1000 tokens",
                   f"minted 1.5 tokens to {bob.address}: it holds 1.5 tokens"]
    assert devnet_main(["mint", f"{alice.address}=7", *on_chain, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"address": alice.address, "minted": 7, "balance": str(1000 * TOKENS + 7)}]
    assert ledger.token.balance_of(bob.address) == 3 * TOKENS // 2


def test_mint_refuses_a_key_that_does_not_own_the_token_and_a_token_not_deployed_as_dev(
        deployed, capsys: pytest.CaptureFixture[str]) -> None:
    rpc_url, deployments, ledger = deployed
    deployer, alice = dev_accounts(2)
    on_chain = ["--rpc-url", rpc_url, "--deployments", str(deployments)]
    assert devnet_main(["mint", f"{alice.address}=1tokens", *on_chain, "--key", alice.key.to_0x_hex()]) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: the dev token's owner is {deployer.address}, not {alice.address}: pass the deployer's key"]
    doc = json.loads(deployments.read_text())
    doc["31337"]["dev_token"] = False  # as `devnet deploy --token <an existing ERC-20>` records it
    deployments.write_text(json.dumps(doc))
    assert devnet_main(["mint", f"{alice.address}=1tokens", *on_chain, "--key", deployer.key.to_0x_hex()]) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: refusing to mint: the stake token at ")
    assert ledger.token.balance_of(alice.address) == 0
