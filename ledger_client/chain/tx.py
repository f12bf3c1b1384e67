"""Sending transactions from a local key: nonces, gas, retries and revert decoding.

`TxSender.send(call)` estimates gas (a revert surfaces here, before anything is signed, as the
contract's custom error), takes the next nonce from the node's pending count under a lock so
concurrent sends from one key never collide (and a reorg or another process using the key is
followed), signs locally, broadcasts with retries on transient RPC errors, and waits for the
receipt. A transaction mined with status 0 is replayed as a call to recover its custom error.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import requests
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import (
    ContractCustomError,
    ContractLogicError,
    ContractPanicError,
    TransactionNotFound,
    Web3RPCError,
)

from ledger_client.chain.errors import LedgerError, RpcUnreachable, TransactionFailed, UnknownRevert, decode_revert
from protocol.phases import phase

TRANSIENT = (requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)
RECEIPT_EVERY_S = 2.0
"""How often a sender asks again for a receipt that was not there at once: the chain's block time (a sender's
`receipt_every_s`). The receipt is asked for right after the broadcast (a devnet mines at once), then half a block
later, then once a block: 2–3 requests a transaction at 2 s blocks, where polling several times a second took ~10
(issue 46)."""
FEE_QUOTE_TTL_S = 2.0
"""How long a sender reuses its fee quote (web3 asked for the priority fee and the latest block before every
transaction). The quote offers twice the base fee, which EIP-1559 lets rise at most 12.5 % a block."""


def revert_from_exception(exc: Exception, function: str = "") -> LedgerError:
    """Map a web3 contract exception to our ContractRevert subclasses."""
    data = getattr(exc, "data", None)
    if isinstance(exc, ContractCustomError) and isinstance(data, str):
        return decode_revert(data, function)
    if isinstance(exc, ContractPanicError):
        return UnknownRevert({"panic": str(exc)}, function)
    if isinstance(data, str) and data.startswith("0x") and len(data) >= 10:
        return decode_revert(data, function)
    return UnknownRevert({"message": getattr(exc, "message", None) or str(exc)}, function)


def with_retries(fn: Callable[[], Any], attempts: int = 5, base_delay: float = 0.2, what: str = "RPC") -> Any:
    """Run `fn`, retrying transient connection errors with exponential backoff."""
    for attempt in range(attempts):
        try:
            return fn()
        except TRANSIENT as exc:
            if attempt == attempts - 1:
                raise RpcUnreachable(f"{what} failed after {attempts} attempts: {exc.__class__.__name__}") from exc
            time.sleep(base_delay * 2**attempt)
    raise AssertionError("unreachable")


class TxSender:
    """Signs and sends transactions for one local account, safe to share between threads."""

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount,
        gas_headroom: float = 1.25,
        receipt_timeout: float = 120.0,
        attempts: int = 5,
        receipt_every_s: float = RECEIPT_EVERY_S,
    ):
        self.w3 = w3
        self.account = account
        self.address = account.address
        self.gas_headroom = gas_headroom
        self.receipt_timeout = receipt_timeout
        self.attempts = attempts
        self.receipt_every_s = receipt_every_s
        self._lock = threading.Lock()
        self._next_nonce: int | None = None
        self._chain_id = w3.eth.chain_id
        self._fee_quote: tuple[float, dict[str, int]] | None = None  # (monotonic clock when quoted, fee fields)

    def _chain_nonce(self) -> int:
        return with_retries(lambda: self.w3.eth.get_transaction_count(self.address, "pending"), self.attempts)

    def send(self, call: Any, value: int = 0, function: str = "", min_gas: int = 0) -> Any:
        """Estimate, sign, broadcast and wait for `call` (a web3 ContractFunction); returns the receipt.
        `min_gas`: the least gas limit, for a call whose cost depends on what others send first (the estimate
        is taken on the state before them)."""
        function = function or getattr(call, "fn_name", "")
        base = {"from": self.address, "value": value}
        with phase(f"tx {function}"):
            try:
                gas = with_retries(lambda: call.estimate_gas(base), self.attempts, what=f"estimate {function}")
            except (ContractLogicError, ContractCustomError, ContractPanicError) as exc:
                raise revert_from_exception(exc, function) from None
            except Web3RPCError as exc:
                raise _rpc_error(exc, function) from None
            tx = dict(base, gas=max(min_gas, int(gas * self.gas_headroom) + 10_000), chainId=self._chain_id,
                      **self._fees())
            with self._lock:
                # The node's pending count is the truth: it includes our in-flight transactions, and it
                # is lower than our count after a reorg dropped some (their nonces must be reused).
                self._next_nonce = self._chain_nonce()
                tx_hash = self._broadcast(call, tx, function)
        with phase("block"):  # the receipt: waiting for the block that includes the transaction
            return self._wait(tx_hash, call, tx, function)

    def _fees(self) -> dict[str, int]:
        """EIP-1559 fee fields as web3 fills them (the node's priority fee, plus twice the latest base fee), quoted
        at most every FEE_QUOTE_TTL_S; none on a chain without a base fee (web3 then fills a gas price)."""
        now = time.monotonic()
        if self._fee_quote is None or now - self._fee_quote[0] > FEE_QUOTE_TTL_S:
            block = with_retries(lambda: self.w3.eth.get_block("latest"), self.attempts, what="latest block")
            fees: dict[str, int] = {}
            if block.get("baseFeePerGas") is not None:
                priority = with_retries(lambda: self.w3.eth.max_priority_fee, self.attempts, what="priority fee")
                fees = {"maxPriorityFeePerGas": priority, "maxFeePerGas": priority + 2 * block["baseFeePerGas"]}
            self._fee_quote = (now, fees)
        return dict(self._fee_quote[1])

    def _broadcast(self, call: Any, tx: dict, function: str) -> bytes:
        """Sign with the reserved nonce and broadcast (caller holds the lock)."""
        for attempt in range(self.attempts):
            tx["nonce"] = self._next_nonce
            built = call.build_transaction(tx)
            signed = self.account.sign_transaction(built)
            try:
                tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
                self._next_nonce += 1
                return tx_hash
            except TRANSIENT:
                time.sleep(0.2 * 2**attempt)
            except Web3RPCError as exc:
                msg = str(exc).lower()
                if "nonce too low" in msg or "nonce too high" in msg or "already known" in msg:
                    self._next_nonce = self._chain_nonce()  # another process used this key; resync
                    continue
                raise _rpc_error(exc, function) from None
        raise RpcUnreachable(f"{function}: could not broadcast after {self.attempts} attempts")

    def _wait(self, tx_hash: bytes, call: Any, tx: dict, function: str) -> Any:
        receipt = self._receipt(tx_hash, function)
        if receipt["status"] == 1:
            return receipt
        try:  # replay as a call to recover the custom error
            call.call({"from": self.address, "value": tx.get("value", 0)}, block_identifier=receipt["blockNumber"] - 1)
        except (ContractLogicError, ContractCustomError, ContractPanicError) as exc:
            raise revert_from_exception(exc, function) from None
        raise TransactionFailed(f"{function}: transaction 0x{bytes(tx_hash).hex()} reverted")

    def _receipt(self, tx_hash: bytes, function: str) -> Any:
        """The transaction's receipt, asked for at once, then half a block later, then once a block
        (`receipt_every_s`); TransactionFailed after receipt_timeout."""
        deadline = time.monotonic() + self.receipt_timeout
        delay = self.receipt_every_s / 2
        while True:
            try:
                return with_retries(lambda: self.w3.eth.get_transaction_receipt(tx_hash), self.attempts,
                                    what=f"receipt of {function}")
            except TransactionNotFound:
                pass
            if time.monotonic() + delay > deadline:
                raise TransactionFailed(f"{function}: no receipt for {bytes(tx_hash).hex()} within "
                                        f"{self.receipt_timeout}s")
            time.sleep(delay)
            delay = self.receipt_every_s


def _rpc_error(exc: Web3RPCError, function: str) -> LedgerError:
    msg = getattr(exc, "message", None) or str(exc)
    lowered = msg.lower()
    if "insufficient funds" in lowered:
        return LedgerError(f"{function}: the sender has too little ETH for gas ({msg.splitlines()[0]})")
    data = getattr(exc, "data", None)
    if isinstance(data, str) and data.startswith("0x") and len(data) >= 10:
        return decode_revert(data, function)
    return LedgerError(f"{function}: RPC error: {msg.splitlines()[0]}")
