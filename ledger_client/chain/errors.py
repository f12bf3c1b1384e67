"""Exceptions of the ledger client, including one class per custom error of the contracts.

Every Solidity custom error (ours and OpenZeppelin's) becomes a subclass of `ContractRevert`
with the same name, e.g. `errors.InvalidNonce`, so callers can `except errors.InvalidNonce`.
Messages are one line that names the problem, ready for a CLI to print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import keccak

ABI_DIR = Path(__file__).resolve().parent / "abi"


class LedgerError(Exception):
    """Base of every error raised by ledger_client; its message is one line for a user."""


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


class ContractRevert(LedgerError):
    """A call reverted with a custom error; `.error` is its name and `.args_dict` its arguments."""

    error: str = ""

    def __init__(self, args_dict: dict[str, Any] | None = None, function: str = ""):
        self.args_dict = args_dict or {}
        self.function = function
        shown = ", ".join(f"{k}={_show(v)}" for k, v in self.args_dict.items())
        where = f"{function}: " if function else ""
        super().__init__(f"{where}reverted with {self.error}({shown})")


class UnknownPool(ContractRevert):
    """ComputePool's `UnknownPool(uint256 poolId)`: no pool has this id (bad input to a command, exit 2)."""

    error = "UnknownPool"


class UnknownRevert(ContractRevert):
    """A revert whose data matches no known custom error (e.g. a plain `require` message)."""

    error = "UnknownRevert"


def _show(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    return str(v)


def _signature(item: dict) -> str:
    return f"{item['name']}({','.join(_canonical(i) for i in item['inputs'])})"


def _canonical(inp: dict) -> str:
    t = inp["type"]
    if t.startswith("tuple"):
        return "(" + ",".join(_canonical(c) for c in inp["components"]) + ")" + t[5:]
    return t


def _load_error_table() -> dict[bytes, tuple[type[ContractRevert], list[dict]]]:
    table: dict[bytes, tuple[type[ContractRevert], list[dict]]] = {}
    for path in sorted(ABI_DIR.glob("*.json")):
        for item in json.loads(path.read_text())["abi"]:
            if item["type"] != "error":
                continue
            selector = keccak(text=_signature(item))[:4]
            if selector in table:
                continue
            cls = globals().get(item["name"])
            if cls is None:
                cls = type(item["name"], (ContractRevert,), {"error": item["name"], "__doc__": f"Custom error `{_signature(item)}`."})
                globals()[item["name"]] = cls
            table[selector] = (cls, item["inputs"])
    return table


_ERRORS = _load_error_table()


def decode_revert(data: bytes | str | None, function: str = "") -> ContractRevert:
    """Turn revert data (selector + ABI-encoded args) into the matching ContractRevert subclass."""
    if isinstance(data, str):
        data = bytes.fromhex(data.removeprefix("0x"))
    data = data or b""
    entry = _ERRORS.get(data[:4])
    if entry is None:
        if data[:4] == bytes.fromhex("08c379a0"):  # Error(string)
            (msg,) = abi_decode(["string"], data[4:])
            return UnknownRevert({"message": msg}, function)
        return UnknownRevert({"data": data}, function)
    cls, inputs = entry
    values = abi_decode([_canonical(i) for i in inputs], data[4:]) if inputs else ()
    return cls({i["name"] or f"arg{n}": v for n, (i, v) in enumerate(zip(inputs, values))}, function)


def revert_class(name: str) -> type[ContractRevert]:
    """The exception class for the custom error `name` (raises KeyError if the ABIs have none)."""
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, ContractRevert)):
        raise KeyError(name)
    return cls


def __getattr__(name: str) -> Any:  # pragma: no cover - only for static-analysis friendliness
    raise AttributeError(f"ledger_client.chain.errors has no custom error named {name!r}")
