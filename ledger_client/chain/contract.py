"""Base of the generated bindings: a deployed contract bound to a Web3 and an optional sender."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError, ContractPanicError

from ledger_client.chain.errors import LedgerError
from ledger_client.chain.tx import TxSender, revert_from_exception, with_retries

ABI_DIR = Path(__file__).resolve().parent / "abi"


@dataclass(frozen=True)
class EventMeta:
    """Where an event was emitted."""

    block_number: int
    block_hash: bytes
    tx_hash: bytes
    log_index: int
    address: str


@lru_cache(maxsize=None)
def load_artifact(name: str) -> dict:
    """The ABI and creation bytecode of contract `name` (from ledger_client/chain/abi/)."""
    path = ABI_DIR / f"{name}.json"
    if not path.exists():
        raise LedgerError(f"no compiled artifact for {name} in {ABI_DIR} (run `make contracts`)")
    return json.loads(path.read_text())


class BoundContract:
    """A deployed contract; generated subclasses add one typed method per ABI function."""

    NAME = ""

    def __init__(self, w3: Web3, address: str, sender: TxSender | None = None):
        self.w3 = w3
        self.address = Web3.to_checksum_address(address)
        self.sender = sender
        self.contract = w3.eth.contract(address=self.address, abi=load_artifact(self.NAME)["abi"])

    def with_sender(self, sender: TxSender) -> "BoundContract":
        """The same contract, sending transactions from `sender`."""
        return type(self)(self.w3, self.address, sender)

    def _call(self, name: str, *args: Any) -> Any:
        fn = self.contract.get_function_by_name(name)(*args)
        try:
            return with_retries(fn.call, what=name)
        except (ContractLogicError, ContractCustomError, ContractPanicError) as exc:
            raise revert_from_exception(exc, name) from None

    def _transact(self, name: str, *args: Any) -> Any:
        if self.sender is None:
            raise LedgerError(f"{self.NAME}.{name}: no sender (key) configured for transactions")
        return self.sender.send(self.contract.get_function_by_name(name)(*args), function=name)

    def function(self, name: str, *args: Any) -> Any:
        """The raw web3 ContractFunction (for gas estimation or custom sending)."""
        return self.contract.get_function_by_name(name)(*args)
