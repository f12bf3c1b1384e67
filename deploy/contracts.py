"""Deploying the proofswarm contracts to any EVM chain from an RPC URL and a key."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount
from web3 import Web3

from ledger_client.chain.bindings import StakeManager
from ledger_client.chain.contract import load_artifact
from ledger_client.chain.errors import LedgerError
from ledger_client.chain.ledger import Deployment
from ledger_client.chain.tx import TxSender


def _deploy(sender: TxSender, name: str, *args) -> str:
    art = load_artifact(name)
    factory = sender.w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"])
    receipt = sender.send(factory.constructor(*args), function=f"deploy {name}")
    address = receipt["contractAddress"]
    if not address:
        raise LedgerError(f"deploying {name} produced no contract address")
    return address


MIN_UNBONDING_DELAY_S = 3600
MAX_UNBONDING_DELAY_S = 90 * 24 * 3600
"""StakeManager's bounds on the unbonding delay (MIN_UNBONDING_DELAY, MAX_UNBONDING_DELAY)."""


def deploy_contracts(
    w3: Web3,
    deployer: LocalAccount,
    token: str | None = None,
    treasury: str | None = None,
    unbonding_delay: int = 7 * 24 * 3600,
) -> Deployment:
    """Deploy StakeManager, ComputePool and ValidatorCourt (and a mintable DevStakeToken if `token` is None).

    The deployer becomes the StakeManager admin and grants SLASHER_ROLE to the ComputePool and the court.
    `treasury` (default: the deployer) receives the non-bounty part of slashes.
    """
    if not MIN_UNBONDING_DELAY_S <= unbonding_delay <= MAX_UNBONDING_DELAY_S:
        raise LedgerError(f"unbonding delay {unbonding_delay}s is outside [{MIN_UNBONDING_DELAY_S}, {MAX_UNBONDING_DELAY_S}]")
    sender = TxSender(w3, deployer)
    first_block = w3.eth.block_number
    dev_token = token is None
    if token is None:
        token = _deploy(sender, "DevStakeToken", deployer.address)
    elif not w3.eth.get_code(Web3.to_checksum_address(token)):
        raise LedgerError(f"no token contract at {token}")
    stake = _deploy(sender, "StakeManager", token, treasury or deployer.address, unbonding_delay, deployer.address)
    pool = _deploy(sender, "ComputePool", token, stake)
    court = _deploy(sender, "ValidatorCourt", pool)
    binding = StakeManager(w3, stake, sender)
    binding.grant_role(binding.slasher_role(), pool)
    binding.grant_role(binding.slasher_role(), court)
    return Deployment(chain_id=w3.eth.chain_id, token=token, stake_manager=stake, compute_pool=pool,
                      validator_court=court, deployer=deployer.address, block=first_block, dev_token=dev_token)
