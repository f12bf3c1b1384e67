"""The trainer's intake of batched leaves (docs/protocol.md §3.1): a leaf is final — no challenge can void it any more —
once the challenge window after its batch's posting has closed with the batch not voided and the leaf not voided
(R3.10). `LedgerSource` asks `final_leaves` each poll and consumes them as it consumes final verdicts, each once, by the
leaf's id (the work id of its binding, `protocol.submission.leaf_binding`: a leaf posted in two batches is one leaf).

A batch's list is fetched and rebuilt (ledger_client.chain.batches.check_posted) once its window has closed: a list that
does not rebuild its batch (which a validator should have voided) gives nothing to train on; one not served yet is
tried again at doubling waits. What stays open: `proveDuplicate` has no window, so a counter can be voided after the
trainer took its leaf (its worker signed two leaves for it, and is slashed for it).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ledger_client.chain import batches
from ledger_client.chain.bindings import WorkBatches
from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.ledger import Ledger
from ledger_client.ipfs.content import ContentError, ContentUnavailable, get_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.batchlist import BatchListError, decode_batch_list
from protocol.digest import WorkId, hex_text
from protocol.submission import leaf_binding

log = logging.getLogger("proofswarm.trainer")
LIST_RETRY_S = 10.0
"""The first wait before fetching a closed batch's list again; it doubles with every miss, up to LIST_RETRY_MAX_S."""
LIST_RETRY_MAX_S = 300.0


class BatchIntake:
    """The final leaves of one pool's batches."""

    def __init__(self, ledger: Ledger, wb: WorkBatches, kubo: KuboClient, pool_id: int, challenge_window_s: int,
                 confirmations: int = 0, fetch_timeout_s: float = 30.0):
        self.ledger, self.wb, self.kubo, self.pool_id = ledger, wb, kubo, pool_id
        self.window = challenge_window_s
        self.fetch_timeout_s = fetch_timeout_s
        self.cursor = EventCursor(wb, ["BatchPosted"], None, confirmations=confirmations,
                                  start_block=ledger.deployment.block, batch_blocks=ledger.logs.page_blocks,
                                  pool_id=pool_id)
        self.open: dict[str, dict[str, Any]] = {}
        """Posted batches not taken yet: batch id → {"ref": [pool, epoch, count, root, list digest], "posted_at",
        "retry_at", "wait"}."""
        self.domain = batches.domain_separator(ledger.deployment.chain_id, wb.address)

    def poll(self, latest: Any) -> None:
        for e in self.cursor.poll(latest):
            if isinstance(e, Removed):  # a reorg: every open batch's posting is read again
                for rec in self.open.values():
                    rec["posted_at"] = 0
                continue
            if e.pool_id == self.pool_id:
                self.open.setdefault(bytes(e.batch_id).hex(), {
                    "ref": [e.pool_id, e.epoch, e.count, bytes(e.root).hex(), bytes(e.list_digest).hex()],
                    "posted_at": 0, "retry_at": 0.0, "wait": LIST_RETRY_S / 2})

    def final_leaves(self, head_time: int) -> list[tuple[str, bytes]]:
        """(leaf id, rollout digest) of every leaf whose batch's window closed by `head_time` unvoided, the leaf not
        voided either."""
        out: list[tuple[str, bytes]] = []
        now = time.monotonic()
        for batch_id, rec in list(self.open.items()):
            if rec["retry_at"] > now or (rec["posted_at"] and head_time <= rec["posted_at"] + self.window):
                continue
            posted_at, voided = self.wb.batch_of(bytes.fromhex(batch_id))
            rec["posted_at"] = posted_at
            if not posted_at or voided:  # reorged away, or voided: nothing of it is paid or trained on
                del self.open[batch_id]
                continue
            if head_time <= posted_at + self.window:
                continue
            pool_id, epoch, count, top, digest = rec["ref"]
            ref = (pool_id, epoch, count, bytes.fromhex(top), bytes.fromhex(digest))
            try:
                runs = batches.check_posted(decode_batch_list(get_object(self.kubo, ref[4], self.fetch_timeout_s)),
                                            self.domain, ref)
            except ContentUnavailable as exc:
                rec["wait"] = min(2 * rec["wait"], LIST_RETRY_MAX_S)
                rec["retry_at"] = now + rec["wait"]
                log.warning("batch %s is final but its list is not served (next try in %.0f s): %s",
                            hex_text(bytes.fromhex(batch_id)), rec["wait"], exc)
                continue
            except (BatchListError, ContentError) as exc:
                log.error("final batch %s has a list that does not rebuild it (no validator voided it): nothing of "
                          "it is trained on: %s", hex_text(bytes.fromhex(batch_id)), exc)
                del self.open[batch_id]
                continue
            del self.open[batch_id]
            beacon = bytes(self.wb.beacon_of(pool_id, epoch))
            d = self.ledger.deployment
            for run in runs:
                for k, leaf in enumerate(run.leaves):
                    counter = run.first_counter + k
                    if self.wb.is_void(pool_id, run.worker, epoch, counter):
                        continue
                    binding = leaf_binding(d.chain_id, self.wb.address, pool_id, run.worker, leaf.step, epoch,
                                           counter, beacon)
                    out.append((WorkId(binding.work_id).text, bytes(leaf.rollout_digest)))
        return out

    def state(self) -> dict[str, Any]:
        return {"cursor": self.cursor.state, "open": self.open}

    def restore(self, state: dict[str, Any]) -> None:
        self.cursor.state = state["cursor"]
        self.open = {k: {**v, "retry_at": 0.0} for k, v in state["open"].items()}
