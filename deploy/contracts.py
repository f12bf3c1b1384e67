"""Deploying the proofswarm contracts to any EVM chain from an RPC URL and a key."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount
from web3 import Web3

from deploy.terms import MAX_UNBONDING_DELAY_S, MIN_UNBONDING_DELAY_S
from ledger_client.chain.bindings import StakeManager
from ledger_client.chain.contract import load_artifact
from ledger_client.chain.errors import LedgerError
from ledger_client.chain.ledger import Deployment
from ledger_client.chain.tx import TxSender


def _deploy(sender: TxSender, name: str, *args, libraries: dict[str, str] | None = None) -> str:
    """Deploy contract `name`; the libraries it links against are deployed first (once per `libraries` dict,
    which maps a library's name to its address)."""
    art = load_artifact(name)
    bytecode = art["bytecode"]
    for lib, offsets in art.get("links", {}).items():
        if libraries is None:
            libraries = {}
        if lib not in libraries:
            libraries[lib] = _deploy(sender, lib, libraries=libraries)
        address = libraries[lib][2:].lower()
        for start in offsets:  # each placeholder is 20 bytes at byte `start` of the code (after "0x")
            at = 2 + 2 * start
            bytecode = bytecode[:at] + address + bytecode[at + 40:]
    factory = sender.w3.eth.contract(abi=art["abi"], bytecode=bytecode)
    receipt = sender.send(factory.constructor(*args), function=f"deploy {name}")
    address = receipt["contractAddress"]
    if not address:
        raise LedgerError(f"deploying {name} produced no contract address")
    return address


DEVNET_COURT_MIN_PERIOD_S = 5
"""The court's shortest window on the devnet (anvil mines a block a second there): five blocks."""


def deploy_contracts(
    w3: Web3,
    deployer: LocalAccount,
    token: str | None = None,
    treasury: str | None = None,
    unbonding_delay: int = 7 * 24 * 3600,
    court_min_period: int = DEVNET_COURT_MIN_PERIOD_S,
) -> Deployment:
    """Deploy StakeManager, ComputePool, ValidatorCourt, ForcedErrors and WorkBatches (and a mintable DevStakeToken if
    `token` is None).

    The deployer becomes the StakeManager admin and grants SLASHER_ROLE to the ComputePool, the court, ForcedErrors
    and WorkBatches (slashers of their own: validators and workers lock their chain's or their batches' bond there).
    `treasury` (default: the deployer) receives the non-bounty part of slashes. `court_min_period` is the
    shortest window a court pool may set, in seconds: a few of the chain's block times.
    """
    if not MIN_UNBONDING_DELAY_S <= unbonding_delay <= MAX_UNBONDING_DELAY_S:
        raise LedgerError(f"unbonding delay {unbonding_delay}s is outside [{MIN_UNBONDING_DELAY_S}, {MAX_UNBONDING_DELAY_S}]")
    if not 0 < court_min_period < 2**24:
        raise LedgerError(f"court minimum period {court_min_period}s must be positive and below 2^24")
    sender = TxSender(w3, deployer)
    first_block = w3.eth.block_number
    dev_token = token is None
    if token is None:
        token = _deploy(sender, "DevStakeToken", deployer.address)
    elif not w3.eth.get_code(Web3.to_checksum_address(token)):
        raise LedgerError(f"no token contract at {token}")
    stake = _deploy(sender, "StakeManager", token, treasury or deployer.address, unbonding_delay, deployer.address)
    pool = _deploy(sender, "ComputePool", token, stake)
    court = _deploy(sender, "ValidatorCourt", pool, court_min_period)
    forced_errors = _deploy(sender, "ForcedErrors", court)
    work_batches = _deploy(sender, "WorkBatches", pool)
    binding = StakeManager(w3, stake, sender)
    for slasher in (pool, court, forced_errors, work_batches):
        binding.grant_role(binding.slasher_role(), slasher)
    return Deployment(chain_id=w3.eth.chain_id, token=token, stake_manager=stake, compute_pool=pool,
                      validator_court=court, forced_errors=forced_errors, work_batches=work_batches, deployer=deployer.address, block=first_block,
                      dev_token=dev_token)

