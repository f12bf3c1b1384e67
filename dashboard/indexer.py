"""Following the chain into the index, and IPFS objects into its cache.

`ChainIndexer.poll_once()` reads new events of the deployment's contracts (ComputePool, StakeManager and, when
deployed, the ValidatorCourt) through the ledger client's
reorg-safe cursors and writes them, together with the cursors' state, in one SQLite
transaction: a crash or an RPC outage at any point leaves either the whole batch or none of it,
and the batch delivered again is upserted onto the same rows. After a reorganisation the cursor
reports vanished events as `Removed` (their rows are deleted); transactions that were re-included
in other blocks are not re-delivered by the cursor, so their rows are moved to the block that now
holds them (read from the receipt), making the index equal to a fresh re-index.

`ObjectFetcher` runs beside it and fills the IPFS cache (run specs, manifests, metrics objects,
evidence), so a slow or missing object never holds up the chain index.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue
from web3 import Web3
from web3.exceptions import TransactionNotFound

from dashboard.chain_source import (
    ComputePool,
    Deployment,
    EventCursor,
    KuboClient,
    LedgerError,
    Removed,
    StakeManager,
    ValidatorCourt,
    cid_to_digest,
    get_object,
    parse_manifest,
    snake,
)
from dashboard.store import EventRow, Store
from protocol.digest import WorkId, hex_text

log = logging.getLogger("proofswarm.explorer")

AMOUNT_FIELDS = {"amount", "budget", "refunded", "bonded", "unbonding", "slashed", "allocation", "bounty", "value",
                 "bond", "locked", "fee", "fee_budget", "validator_bond", "verdict_fee", "dispute_bond",
                 "non_voter_penalty", "silence_penalty", "wrong_verdict_slash"}
PARTY_FIELDS = ("validator", "judge", "disputer", "voter", "party", "to")
"""The field naming the account a court event is about (its `party` column), first match wins."""
ZERO_DIGEST = "0x" + "00" * 32
REORG_SEARCH_BLOCKS = 256  # as deep as the cursors remember (EventCursor.history_blocks)


def _json_value(name: str, value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return hex_text(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and name in AMOUNT_FIELDS:
        return str(value)  # uint256: more digits than a JSON number keeps
    if isinstance(value, Mapping):  # a struct (the court's parameters), keyed as the bindings name fields
        return {snake(k): _json_value(snake(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(name, v) for v in value]
    return value


class ChainIndexer:
    """Indexes every event of the ComputePool, the StakeManager and (when deployed) the ValidatorCourt of one
    deployment into `store`."""

    def __init__(self, store: Store, w3: Web3, deployment: Deployment):
        self.store = store
        self.w3 = w3
        self.deployment = deployment
        self.pool = ComputePool(w3, deployment.compute_pool)
        stake = StakeManager(w3, deployment.stake_manager)
        self.contracts = {"ComputePool": self.pool, "StakeManager": stake}
        if deployment.validator_court:
            self.contracts["ValidatorCourt"] = ValidatorCourt(w3, deployment.validator_court)
        self._block_times: dict[tuple[int, str], int] = {}
        self.cursors = {
            name: EventCursor(c, [i["name"] for i in c.contract.abi if i["type"] == "event"], None,
                              start_block=deployment.block)
            for name, c in self.contracts.items()
        }
        self._check_index_belongs_here()
        self.head: int | None = None
        tip = self.store.get_meta("tip")
        self.indexed_block: int | None = tip[0] if tip else None
        self.last_error: str | None = None
        self.polls = 0
        self.errors = 0
        self.last_poll_at: float | None = None

    def _check_index_belongs_here(self) -> None:
        identity = {"chain_id": self.w3.eth.chain_id, "compute_pool": self.pool.address,
                    "stake_manager": self.contracts["StakeManager"].address,
                    "validator_court": self.deployment.validator_court}
        saved = self.store.get_meta("identity")
        if saved is None:
            with self.store.transaction():
                self.store.set_meta("identity", identity)
        elif saved != identity:
            raise LedgerError(f"the index {self.store.path} belongs to chain {saved['chain_id']} / pool contract "
                              f"{saved['compute_pool']}, not to this deployment; use another --db")

    # -------------------------------------------------------------- polling

    def poll_once(self) -> int:
        """Index what is new; returns the number of rows written or removed. Raises on RPC errors
        (nothing of the failed poll is kept)."""
        for name, cursor in self.cursors.items():  # the saved state, not what a failed poll left in memory
            saved = self.store.get_meta(f"cursor:{name}")
            if saved is not None:
                cursor.state = saved
        changed = 0
        with self.store.transaction():
            self._follow_reincluded_transactions()
            for name, cursor in self.cursors.items():
                events = cursor.poll()
                ordinals: dict[str, int] = {}
                for event in events:
                    if isinstance(event, Removed):
                        tx, ordinal = event.key.split(":")
                        changed += self.store.remove_event(name, tx, int(ordinal))
                        continue
                    tx = hex_text(event.meta.tx_hash)
                    ordinal = ordinals.get(tx, 0)
                    ordinals[tx] = ordinal + 1
                    self._apply(name, ordinal, event)
                    changed += 1
                self.store.set_meta(f"cursor:{name}", cursor.state)
            self.store.link_court_rows()
            tip = min(c.next_block for c in self.cursors.values()) - 1
            block = self.w3.eth.get_block(tip)
            self.store.set_meta("tip", [tip, block["hash"].to_0x_hex()])
        self.head = self.w3.eth.block_number
        self.indexed_block = tip
        self.polls += 1
        self.last_poll_at = time.time()
        self.last_error = None
        return changed

    def _apply(self, contract: str, ordinal: int, event: Any) -> None:
        name = type(event).EVENT
        data = {f.name: _json_value(f.name, getattr(event, f.name)) for f in dataclasses.fields(event)
                if f.name != "meta"}
        if name == "RewardsClaimed":
            data["work_ids"] = self._claimed_work_ids(event.meta.tx_hash)
        meta = event.meta
        worker = data.get("worker")
        party = next((data[f] for f in PARTY_FIELDS if isinstance(data.get(f), str)), None)
        block_hash = hex_text(meta.block_hash)
        self.store.upsert_event(EventRow(
            tx_hash=hex_text(meta.tx_hash), log_index=meta.log_index, contract=contract, ordinal=ordinal,
            name=name, block_number=meta.block_number, block_hash=block_hash,
            block_time=self._block_time(meta.block_number, block_hash),
            pool_id=data.get("pool_id"), work_id=data.get("work_id"), worker=worker.lower() if worker else None,
            party=party.lower() if party else None, data=data,
        ))
        wanted = {"PoolCreated": ("task_ref", "runspec"), "CheckpointPublished": ("manifest_digest", "manifest"),
                  "WorkChallenged": ("evidence_digest", "evidence"), "VerdictGiven": ("evidence_digest", "evidence"),
                  "Disputed": ("evidence_digest", "evidence")}.get(name)
        if wanted and data[wanted[0]] != ZERO_DIGEST:
            self.store.want_object(data[wanted[0]], wanted[1])

    def _block_time(self, number: int, block_hash: str) -> int:
        """The timestamp of the block (by number and hash: a reorged height is another block)."""
        key = (number, block_hash)
        if key not in self._block_times:
            if len(self._block_times) > 4096:
                self._block_times.clear()
            self._block_times[key] = self.w3.eth.get_block(block_hash)["timestamp"]
        return self._block_times[key]

    def _claimed_work_ids(self, tx_hash: bytes) -> list[str]:
        """The work ids a claim paid, from its calldata (a claim pays all of them or reverts)."""
        tx = self.w3.eth.get_transaction(tx_hash)
        if tx["to"] is None or Web3.to_checksum_address(tx["to"]) != self.pool.address:
            return []  # claimed through another contract: the ids are not in this transaction's calldata
        _, args = self.pool.contract.decode_function_input(tx["input"])
        return [WorkId(w).text for w in args["workIds"]]

    def _follow_reincluded_transactions(self) -> None:
        """After a reorg below the last indexed block, move rows whose transaction now sits in
        another block, and drop rows whose transaction is gone."""
        tip = self.store.get_meta("tip")
        if tip is None:
            return
        number, block_hash = tip
        block = self.w3.eth.get_block(number) if number <= self.w3.eth.block_number else None
        if block is not None and block["hash"].to_0x_hex() == block_hash:
            return
        for n, h in self.store.blocks_since(number - REORG_SEARCH_BLOCKS):
            if n > number:
                continue
            canonical = self.w3.eth.get_block(n) if n <= self.w3.eth.block_number else None
            if canonical is not None and canonical["hash"].to_0x_hex() == h:
                break  # every older block is canonical too
            for row in self.store.events_in_block(n):
                self._move_or_drop(row)

    def _move_or_drop(self, row: EventRow) -> None:
        receipt = self.w3.eth.get_transaction_receipt(row.tx_hash) if self._tx_known(row.tx_hash) else None
        if receipt is None or receipt["blockHash"] is None:
            self.store.remove_event(row.contract, row.tx_hash, row.ordinal)
            return
        address = self.contracts[row.contract].address
        logs = [lg for lg in receipt["logs"] if Web3.to_checksum_address(lg["address"]) == address]
        if row.ordinal >= len(logs):
            self.store.remove_event(row.contract, row.tx_hash, row.ordinal)
            return
        lg = logs[row.ordinal]
        block_hash = lg["blockHash"].to_0x_hex()
        self.store.move_event(row.contract, row.tx_hash, row.ordinal, lg["blockNumber"], block_hash, lg["logIndex"],
                              self._block_time(lg["blockNumber"], block_hash))

    def _tx_known(self, tx_hash: str) -> bool:
        try:
            return self.w3.eth.get_transaction(tx_hash)["blockNumber"] is not None
        except TransactionNotFound:
            return False

    def run(self, stop: threading.Event, poll_s: float = 0.5) -> None:
        """Poll until `stop` is set, surviving RPC outages (retrying with backoff up to 10 s)."""
        delay = poll_s
        while not stop.is_set():
            try:
                self.poll_once()
                delay = poll_s
            except Exception as exc:  # an outage, a node restart, a malformed answer: retry, never die
                self.errors += 1
                self.last_error = f"{exc.__class__.__name__}: {exc}"[:300]
                log.warning("index poll failed (retrying in %.1fs): %s", delay, self.last_error)
                delay = min(10.0, max(poll_s, delay * 2))
            stop.wait(delay)


class ObjectFetcher:
    """Fetches the IPFS objects the index asks for, caching each by digest."""

    def __init__(self, store: Store, kubo: KuboClient, timeout_s: float = 5.0):
        self.store = store
        self.kubo = kubo
        self.timeout_s = timeout_s
        self.fetched = 0
        self.failed = 0

    def fetch_due(self) -> int:
        """Fetch every object that is due; returns how many arrived."""
        arrived = 0
        for digest, kind in self.store.objects_due():
            try:
                body = self._body(kind, get_object(self.kubo, bytes.fromhex(digest[2:]), timeout=self.timeout_s))
            except Exception as exc:  # unavailable, mismatched, not JSON: try again later
                known = self.store.object(digest)
                attempts = known.attempts if known else 0
                with self.store.transaction():
                    self.store.object_failed(digest, f"{exc.__class__.__name__}: {exc}"[:300],
                                             min(60.0, 2.0 ** attempts))
                self.failed += 1
                continue
            with self.store.transaction():
                self.store.put_object_body(digest, body)
                if kind == "manifest" and isinstance(body, dict) and isinstance(body.get("metrics"), str):
                    self.store.want_object(hex_text(cid_to_digest(body["metrics"])), "metrics")
            self.fetched += 1
            arrived += 1
        return arrived

    @staticmethod
    def _body(kind: str, data: bytes) -> JsonValue:
        if kind == "manifest":
            m = parse_manifest(data)
            return {"step": m.step, "parent": m.parent, "dtype": m.dtype, "shards": len(m.shards),
                    "total_bytes": m.total_bytes, "metrics": m.metrics}
        return json.loads(data)

    def run(self, stop: threading.Event, poll_s: float = 0.5) -> None:
        while not stop.is_set():
            try:
                if self.fetch_due():
                    continue
            except Exception as exc:  # Kubo down: keep trying
                log.warning("object fetch failed: %s", exc)
            stop.wait(poll_s)
