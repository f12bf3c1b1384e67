"""The ledger-gated work source: only submissions the ledger marks accepted, each exactly once.

It follows `WorkAccepted` events of one pool with an in-memory event cursor whose state is
saved inside the trainer's checkpoint (via `state()`), so after a restart every accepted
submission is handed out exactly once. Right before a submission is handed out its on-chain
status is read again: work challenged after its attestation (a second validator overruling
the first within the challenge window) is skipped. Items are named by work id; the file is fetched
by the rollout digest of the work's `WorkSubmitted` event. Files that cannot be fetched yet are
retried on the next poll.
"""

from __future__ import annotations

import logging
from typing import Any

from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import get_work, rollout_digest_of
from ledger_client.ipfs.content import ContentError, get_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.pool import WorkStatus
from protocol.rollouts import RolloutFileError, decode_rollouts
from trainer.work_source import WorkItem

log = logging.getLogger("proofswarm.trainer")
CONSUMABLE = (WorkStatus.ACCEPTED, WorkStatus.PAID)


class LedgerSource:
    """WorkSource over the accepted submissions of `pool_id`."""

    def __init__(self, ledger: Ledger, kubo: KuboClient, pool_id: int, fetch_timeout_s: float = 30.0,
                 confirmations: int = 0):
        self.ledger = ledger
        self.kubo = kubo
        self.pool_id = pool_id
        self.fetch_timeout_s = fetch_timeout_s
        self.cursor = EventCursor(ledger.pool, ["WorkAccepted"], None, confirmations=confirmations,
                                  start_block=ledger.deployment.block)
        self.pending: list[str] = []  # accepted work ids whose file is not fetched yet
        self.consumed: list[str] = []
        self.skipped: list[str] = []  # accepted, then rejected before we took it
        self.unreadable: list[str] = []

    def poll(self) -> list[WorkItem]:
        for event in self.cursor.poll():
            if isinstance(event, Removed) or event.pool_id != self.pool_id:
                continue
            work_id = "0x" + bytes(event.work_id).hex()
            if work_id not in self.consumed and work_id not in self.pending:
                self.pending.append(work_id)
        items, still_pending = [], []
        for work_id in self.pending:
            wid = bytes.fromhex(work_id[2:])
            if get_work(self.ledger, wid).status not in CONSUMABLE:
                self.skipped.append(work_id)
                continue
            digest = rollout_digest_of(self.ledger, wid)
            if digest is None:  # the submission's event is not visible yet (or was reorged out)
                still_pending.append(work_id)
                continue
            try:
                batch = decode_rollouts(get_object(self.kubo, digest, timeout=self.fetch_timeout_s))
            except ContentError as exc:
                log.warning("accepted work %s not fetchable yet: %s", work_id, exc)
                still_pending.append(work_id)
                continue
            except RolloutFileError as exc:  # a validator accepted a bad file: never train on it
                log.error("accepted work %s is not a valid rollout file: %s", work_id, exc)
                self.unreadable.append(work_id)
                continue
            self.consumed.append(work_id)
            items.append(WorkItem(id=work_id, batch=batch))
        self.pending = still_pending
        return items

    def state(self) -> dict[str, Any]:
        return {"cursor": self.cursor.state, "pending": list(self.pending), "consumed": list(self.consumed),
                "skipped": list(self.skipped), "unreadable": list(self.unreadable)}

    def restore(self, state: dict[str, Any]) -> None:
        self.cursor.state = state["cursor"]
        self.pending = list(state.get("pending", []))
        self.consumed = list(state.get("consumed", []))
        self.skipped = list(state.get("skipped", []))
        self.unreadable = list(state.get("unreadable", []))

    def report(self, step: int, waiting: bool) -> None:
        """Workers learn the trainer's step from the chain (published checkpoints); nothing to do."""
