"""Reading contract events with a persistent cursor that survives restarts and reorgs.

`EventCursor.poll()` returns the new events of the watched contract, decoded into the typed
dataclasses of `ledger_client.chain.bindings`, up to `head - confirmations`. The cursor remembers the
hash of every block it delivered from and of the last block it scanned. On each poll it checks
those hashes against the chain; after a reorganisation it rewinds to the newest block that is
still canonical and rescans. Each delivered event is identified by (transaction hash, position
among the watched logs of that transaction), so an event whose transaction was re-included in a
new block is not delivered twice, and an event whose transaction vanished is reported once as
`Removed(event)`.

With `state_path=None` the cursor lives in memory and its owner persists `.state` (a plain JSON
dict) itself, e.g. inside the trainer's checkpoint. Otherwise call `commit()` after handling a
batch: the state file is written atomically, so after a crash
the batch is delivered again (at least once); consumers make their handling idempotent (e.g. a
validator checks the on-chain status before sending a verdict).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from eth_utils import event_abi_to_log_topic
from web3 import Web3

from ledger_client.chain.bindings import CONTRACT_EVENT_TYPES
from ledger_client.chain.codegen import snake
from ledger_client.chain.contract import BoundContract, EventMeta
from ledger_client.chain.errors import LedgerError
from ledger_client.chain.logs import DEFAULT_PAGE_BLOCKS, logs_page, pages
from ledger_client.chain.tx import with_retries


@dataclass(frozen=True)
class Removed:
    """A previously delivered event whose block left the canonical chain and was not re-included.

    `key` is "<transaction hash>:<position among the watched logs of that transaction>".
    """

    key: str
    block_number: int


def latest_block(w3: Web3) -> Any:
    """The chain's latest block (number, hash, parent hash, timestamp), with retries."""
    return with_retries(lambda: w3.eth.get_block("latest"), what="eth_getBlockByNumber")


BLOCK_POLL_S = 0.1
"""The shortest wait between two looks at the head of a role waiting for a block (the validator's idle wait, the
trainer's poll): a poll interval of 0.5 s left a validator ~0.25 s behind each submission, the trainer ~0.1 s behind
each verdict — together half a trainer step of the CPU recipe, and files arrived too stale to use."""


class EventCursor:
    """Follows the events `names` of one contract, persisting its position in `state_path`."""

    def __init__(
        self,
        contract: BoundContract,
        names: Iterable[str],
        state_path: str | Path | None,
        confirmations: int = 0,
        start_block: int = 0,
        batch_blocks: int = DEFAULT_PAGE_BLOCKS,
        history_blocks: int = 256,
        added_events: Iterable[str] = (),
        pool_id: int | None = None,
    ):
        """`batch_blocks`: the most blocks one `eth_getLogs` asks for (a role passes its ledger's
        `logs.page_blocks`); the cursor walks from its position to the head in such pages, recording each page's
        end, so a role restarted after a day catches up in pages.
        `added_events`: names a state file written before they were followed may lack; such a file is taken
        up, and those events are followed from its position on (earlier ones are never delivered).
        `pool_id`: follow only that pool's events — the node matches the pool id as the events' first indexed
        topic, so a client reads its own pool's logs, not every pool's (each followed event must have `poolId` as
        its first indexed argument)."""
        self.added_events = set(added_events)
        self.w3: Web3 = contract.w3
        self.contract = contract
        self.names = sorted(set(names))
        self.state_path = Path(state_path) if state_path is not None else None
        self.confirmations = confirmations
        self.batch_blocks = batch_blocks
        self.history_blocks = history_blocks
        self._events = {}
        for item in contract.contract.abi:
            if item["type"] == "event" and item["name"] in self.names:
                self._events[event_abi_to_log_topic(item)] = (item["name"], getattr(contract.contract.events, item["name"])())
        missing = set(self.names) - {n for n, _ in self._events.values()}
        if missing:
            raise LedgerError(f"{contract.NAME} has no events named {sorted(missing)}")
        self._topics: list[Any] = [list(self._events)]
        if pool_id is not None:
            unkeyed = sorted(item["name"] for item in contract.contract.abi if item["type"] == "event"
                             and item["name"] in self.names
                             and [i["name"] for i in item["inputs"] if i["indexed"]][:1] != ["poolId"])
            if unkeyed:
                raise LedgerError(f"{contract.NAME} events {unkeyed} have no indexed poolId first: they cannot be "
                                  "followed for one pool")
            self._topics.append("0x" + pool_id.to_bytes(32, "big").hex())
        self.chain_id = self.w3.eth.chain_id
        self.state = self._load(start_block)
        self._removed_keys: dict[str, Any] = {}

    # -------------------------------------------------------------- state

    def _load(self, start_block: int) -> dict:
        fresh = {"chain_id": self.chain_id, "address": self.contract.address, "events": self.names,
                 "next_block": start_block, "recorded": {}, "delivered": {}}
        if self.state_path is None or not self.state_path.exists():
            return fresh
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, json.JSONDecodeError):
            raise LedgerError(f"event cursor file {self.state_path} is corrupt; move it away to rescan") from None
        if state.get("chain_id") != self.chain_id or state.get("address") != self.contract.address:
            raise LedgerError(
                f"event cursor {self.state_path} belongs to chain {state.get('chain_id')} / {state.get('address')}, "
                f"not chain {self.chain_id} / {self.contract.address}"
            )
        followed = state.get("events") or []
        if followed != self.names and sorted(set(followed) | self.added_events) != self.names:
            raise LedgerError(f"event cursor {self.state_path} follows {state.get('events')}, not {self.names}")
        state["events"] = self.names
        return state

    def commit(self) -> None:
        """Persist the cursor atomically (in-memory cursors persist `state` themselves, e.g. in a checkpoint)."""
        if self.state_path is None:
            raise LedgerError("this event cursor has no state file; persist .state with your own checkpoint")
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.state_path)

    @property
    def next_block(self) -> int:
        return self.state["next_block"]

    # -------------------------------------------------------------- polling

    def poll(self, latest: Any = None) -> list[Any]:
        """New events (typed dataclasses) and `Removed` notices, in chain order. Call `commit()` after handling.
        `latest`: the chain's latest block, read once by a caller that polls several cursors (else read here)."""
        latest = latest if latest is not None else latest_block(self.w3)
        head = latest["number"]
        out: list[Any] = []
        candidates = self._rewind_if_reorged(latest)
        safe = head - self.confirmations
        for start, end in pages(self.state["next_block"], safe, self.batch_blocks):
            logs = logs_page(lambda: self.w3.eth.get_logs({
                "address": self.contract.address, "fromBlock": start, "toBlock": end,
                "topics": self._topics,
            }), f"eth_getLogs in blocks {start}..{end}")
            out.extend(self._deliver(logs, candidates))
            block = latest if end == head else \
                with_retries(lambda: self.w3.eth.get_block(end), what="eth_getBlockByNumber")
            self.state["recorded"][str(end)] = block["hash"].to_0x_hex()
            self.state["next_block"] = end + 1
        for key, number in candidates.items():  # delivered before, gone from the canonical chain
            self.state["delivered"].pop(key, None)
            out.append(Removed(key, number))
        self._prune()
        return out

    def _deliver(self, logs: list, candidates: dict[str, int]) -> list[Any]:
        out = []
        per_tx: dict[str, int] = {}
        for log in sorted(logs, key=lambda l: (l["blockNumber"], l["logIndex"])):
            tx = log["transactionHash"].to_0x_hex()
            n = per_tx.get(tx, 0)
            per_tx[tx] = n + 1
            key = f"{tx}:{n}"
            self.state["recorded"][str(log["blockNumber"])] = log["blockHash"].to_0x_hex()
            if key in self.state["delivered"] and key not in candidates:
                continue  # already delivered from a block that is still canonical (overlapping rescan)
            self.state["delivered"][key] = log["blockNumber"]
            if key in candidates:
                candidates.pop(key)  # re-included after a reorg: the consumer already has it
                continue
            out.append(self._decode(log))
        return out

    def _rewind_if_reorged(self, latest: Any) -> dict[str, int]:
        """If recorded blocks left the canonical chain, rewind; returns delivered events to re-check."""
        recorded = sorted(((int(n), h) for n, h in self.state["recorded"].items()), reverse=True)
        if not recorded:
            return {}
        head, (newest, newest_hash) = latest["number"], recorded[0]
        # the newest recorded block is the latest one, or its parent: canonical, without asking for it
        if (newest == head and latest["hash"].to_0x_hex() == newest_hash) or \
                (newest == head - 1 and latest["parentHash"].to_0x_hex() == newest_hash):
            return {}
        ancestor = None
        for number, h in recorded:
            if number > head:
                continue
            block = with_retries(lambda: self.w3.eth.get_block(number), what="eth_getBlockByNumber")
            if block["hash"].to_0x_hex() == h:
                ancestor = number
                break
        if ancestor == recorded[0][0]:
            return {}
        # Rewind to the newest still-canonical block we know of (or the oldest we remember).
        ancestor = ancestor if ancestor is not None else recorded[-1][0] - 1
        candidates = {key: n for key, n in self.state["delivered"].items() if n > ancestor}
        self.state["recorded"] = {n: h for n, h in self.state["recorded"].items() if int(n) <= ancestor}
        self.state["next_block"] = ancestor + 1
        return candidates

    def _prune(self) -> None:
        floor = self.state["next_block"] - self.history_blocks
        self.state["recorded"] = {n: h for n, h in self.state["recorded"].items() if int(n) >= floor}
        self.state["delivered"] = {k: b for k, b in self.state["delivered"].items() if b >= floor}

    def _decode(self, log: Any) -> Any:
        name, event = self._events[bytes(log["topics"][0])]
        decoded = event.process_log(log)
        meta = EventMeta(
            block_number=log["blockNumber"], block_hash=bytes(log["blockHash"]),
            tx_hash=bytes(log["transactionHash"]), log_index=log["logIndex"], address=log["address"],
        )
        fields = {snake(k): v for k, v in decoded["args"].items()}
        return CONTRACT_EVENT_TYPES[self.contract.NAME][name](**fields, meta=meta)
