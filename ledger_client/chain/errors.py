"""Exceptions of the ledger client, including one class per custom error of the contracts.

Every Solidity custom error (ours and OpenZeppelin's) is a subclass of `ContractRevert` with the same name, e.g.
`errors.InvalidNonce`: `make contracts` generates them into contract_errors.py, imported here, so callers catch a
revert by its type (`except errors.InvalidNonce`, `isinstance(exc, (errors.StaleStep, errors.UnknownStep))`), never
by its name, and a renamed Solidity error breaks every place that still names the old one.
Messages are one line that names the problem, ready for a CLI to print.
"""

from __future__ import annotations

from eth_abi import decode as abi_decode

from ledger_client.chain.contract_errors import *  # noqa: F403 - the generated classes: errors.InvalidNonce, ...
from ledger_client.chain.contract_errors import SELECTORS
from ledger_client.chain.error_bases import ContractRevert, LedgerError


class InsufficientTokens(LedgerError):
    """The account holds too few stake tokens to bond what was asked (nothing was sent)."""


class RpcUnreachable(LedgerError):
    """The Ethereum JSON-RPC endpoint cannot be reached."""


class BadRpcUrl(LedgerError):
    """An RPC URL that is not one (bad input, not an unreachable endpoint)."""


class WrongChain(LedgerError):
    """The endpoint serves another chain than the one expected."""


class NotDeployed(LedgerError):
    """No contract code at an address the deployments file names, or no deployment for the chain."""


class KeyLoadError(LedgerError):
    """A private key or keystore could not be loaded."""


class TransactionFailed(LedgerError):
    """A transaction was mined with status 0 and its revert reason could not be recovered."""


class UnknownRevert(ContractRevert):
    """A revert whose data matches no known custom error (e.g. a plain `require` message)."""

    error = "UnknownRevert"


def decode_revert(data: bytes | str | None, function: str = "") -> ContractRevert:
    """Turn revert data (selector + ABI-encoded args) into the matching ContractRevert subclass."""
    if isinstance(data, str):
        data = bytes.fromhex(data.removeprefix("0x"))
    data = data or b""
    entry = SELECTORS.get(data[:4])
    if entry is None:
        if data[:4] == bytes.fromhex("08c379a0"):  # Error(string)
            (msg,) = abi_decode(["string"], data[4:])
            return UnknownRevert({"message": msg}, function)
        return UnknownRevert({"data": data}, function)
    cls, inputs = entry
    values = abi_decode([abi_type for _, abi_type in inputs], data[4:]) if inputs else ()
    return cls({name: value for (name, _), value in zip(inputs, values)}, function)
