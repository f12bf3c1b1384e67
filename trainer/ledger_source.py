"""The ledger-gated work source: only submissions the ledger marks accepted, each exactly once.

Two modes (`wait_final`):

- **final** (the default, on every chain): a submission is consumed only once its verdict can no
  longer be overturned. In a court pool that is the ComputePool's `WorkAccepted` (the court records
  a verdict there only when it is final); in a permissioned pool, an attestation is final once the
  pool's challenge window has passed (until then a second validator may still challenge it).
- **fast** (opt-in, `trainer start --no-wait-final`): a submission is consumed at its first accepting verdict — the
  ComputePool's `WorkAccepted`, or in a court pool the court's `VerdictGiven(accepted)` while the
  verdict is undisputed. Consumed work is then followed to its final verdict; what ends rejected is
  counted in `overturned` (`consumed_overturned` in the trainer's reports): the price of not waiting.

In a permissioned pool an accepted work's status is read when its acceptance comes, and again only when the pool's
`WorkChallenged` names it or, by the head's timestamp, its challenge window has passed: not at every block while
the window is open (issue 47).

The event cursors live in memory; their state is saved inside the trainer's checkpoint (via
`state()`), so after a restart every accepted submission is handed out exactly once. The consumed work ids are a
`ConsumedLog` (trainer/consumed_log.py): a set in memory, appended to `consumed.log` in the run directory when one is
given, the checkpoint keeping only their count — O(1) a new event and O(new) written a step, whatever the history. Right before a
submission is handed out its on-chain status is read again; work rejected by then is skipped (in a court pool in
final mode only after a reorg: there the acceptance event itself is the final verdict). Items
are named by work id; the file is fetched by the rollout digest of the work's `WorkSubmitted` event.
Files that cannot be fetched yet are retried on the next poll. In a pool whose files settle in batches the final
leaves come from `trainer.batch_intake` (a leaf is final when its batch's window closed with neither voided, in both
modes), each handed out once by its leaf id, alongside the `submitWork` path's. Fetched files are decoded (parsed and validated) by a
`RolloutDecoder` (trainer/decode_pool.py) — in `decode_workers` processes while the next files are fetched — and
taken in pending order: a refused file is `unreadable`, never trained on, in a pool as in process. A decoded file is
then scored again (`rescore`, protocol.rescoring: `trainer start` always passes it): one whose claimed rewards the task
does not give — an accepted forced error (R9.26), a reward a lazy or allied judge let through — is `misscored`, never
trained on either.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from pathlib import Path
from collections.abc import Callable
from typing import Any

from ledger_client.chain.batches import batches_of
from ledger_client.chain.bindings import WorkChallenged, WorkSubmitted
from ledger_client.chain.events import BLOCK_POLL_S, EventCursor, Removed, latest_block
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import court_of, get_work, pool_state, rollout_digest_of
from ledger_client.ipfs.content import ContentError, get_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import WorkId
from protocol.pool import CaseState, WorkStatus
from protocol.rollouts import RolloutBatch, RolloutFileError, decode_rollouts
from trainer.batch_intake import BatchIntake
from trainer.consumed_log import ConsumedLog
from trainer.decode_pool import Decoding, RolloutDecoder
from trainer.work_source import WorkItem

log = logging.getLogger("proofswarm.trainer")
CONSUMABLE = (WorkStatus.ACCEPTED, WorkStatus.PAID)
MIN_POLL_INTERVAL_S = BLOCK_POLL_S
"""`trainer start` polls the chain at most this often: a poll without a new block is one request (the latest block),
and a verdict waits for the next poll — with 0.2 s, ~0.1 s a file on average, a sixth of a CPU recipe step."""
UNFETCHED_RETRY_S = 10.0
"""The wait before fetching an accepted file that was not served again; it doubles with every miss ..."""
UNFETCHED_RETRY_MAX_S = 300.0
"""... up to this."""
DECODING_PER_WORKER = 4
"""Fetched files a poll keeps in flight a decoding process: enough to keep each busy while the next is fetched."""
SUBMITTED_DIGESTS_KEPT = 4096
"""Rollout digests remembered from `WorkSubmitted` events (the newest); an older submission's is looked up."""


class LedgerSource:
    """WorkSource over the accepted submissions of `pool_id` (final ones only when `wait_final`)."""

    def __init__(self, ledger: Ledger, kubo: KuboClient, pool_id: int, fetch_timeout_s: float = 30.0,
                 confirmations: int = 0, wait_final: bool = True, min_poll_interval_s: float = 0.0,
                 consumed_log: Path | ConsumedLog | None = None, decode_workers: int = 0,
                 rescore: Callable[[RolloutBatch], list[int]] | None = None):
        self.ledger = ledger
        self.rescore = rescore
        """The samples of a decoded file whose claimed reward is not the task's (`protocol.rescoring`): a file with any
        is never trained on (None: rewards taken as the validators accepted them)."""
        self.decoder = RolloutDecoder(decode_workers, decode=decode_rollouts)
        """Decodes the fetched files (in `decode_workers` processes; ≤ 1: in this one), collected in pending order."""
        self.min_poll_interval_s = min_poll_interval_s
        self._polled_at = float("-inf")
        self._polled_block: tuple[int, bytes] | None = None
        """(number, hash) of the head the last poll read everything at."""
        self._head_time = 0
        """Its timestamp: the contracts' clock for every read of that poll."""
        self.kubo = kubo
        self.pool_id = pool_id
        self.fetch_timeout_s = fetch_timeout_s
        self.wait_final = wait_final
        self.court = court_of(ledger, pool_id)
        self.challenge_window_s = pool_state(ledger, pool_id).challenge_window_s
        start = ledger.deployment.block
        self.cursors = {"pool": EventCursor(ledger.pool, ["WorkSubmitted", "WorkAccepted", "WorkChallenged"], None,
                                            confirmations=confirmations, start_block=start,
                                            batch_blocks=ledger.logs.page_blocks, pool_id=pool_id)}
        self._digests: dict[str, bytes] = {}
        """Rollout digests from the submissions' own events, read with the acceptances: looking each one up
        took two requests per file. Any reorg empties it (the lookup follows the canonical chain)."""
        if self.court is not None and not wait_final:
            self.cursors["court"] = EventCursor(self.court, ["VerdictGiven"], None, confirmations=confirmations,
                                                start_block=start, batch_blocks=ledger.logs.page_blocks,
                                                pool_id=pool_id)
        wb = batches_of(ledger, pool_id) if self.court is None else None
        self.batches = None if wb is None else BatchIntake(ledger, wb, kubo, pool_id, self.challenge_window_s,
                                                           confirmations, fetch_timeout_s)
        """The pool's final batched leaves (trainer.batch_intake), when its files settle in WorkBatches."""
        self._leaf_digests: dict[str, bytes] = {}
        """Pending final leaves' rollout digests (a leaf has no `WorkSubmitted`; its finality is its batch's)."""
        self.pending: list[str] = []  # accepted work ids not handed out yet
        self._window_ends: dict[str, int] = {}
        """Permissioned pools: the chain time at which an accepted, pending or unsettled work's challenge window
        ends (its `submittedAt` + the window), from its first read. Its status is not read again before then unless
        the pool's `WorkChallenged` names it (reading every such work at every block was a request per file in
        the window a block; issue 47). Any reorg empties it."""
        self._final_by_event: set[str] = set()
        """Pending work whose acceptance event, in a court pool in final mode, is its final verdict: consumed
        without reading its status again, unless a reorg has been seen since (then it is read)."""
        self.consumed = consumed_log if isinstance(consumed_log, ConsumedLog) else ConsumedLog(consumed_log)
        """Work ids handed out (`in` is a set's); in the file `consumed_log` if given (the main rank's: a follower
        passes a `FollowerLog`), else in memory."""
        self.skipped: list[str] = []  # accepted, then rejected before we took it
        self.unreadable: list[str] = []
        self.misscored: list[str] = []  # accepted, but its rewards are not the task's: never trained on
        self.unsettled: list[str] = []  # fast mode: consumed before its verdict was final
        self._unfetched: dict[str, tuple[float, float]] = {}
        """Accepted work whose file could not be fetched: (when to try again, the wait after that)."""
        self.overturned: list[str] = []  # fast mode: consumed, then finally rejected

    def poll(self) -> list[WorkItem]:
        """Newly consumable submissions, fetched; [] without asking the chain when called again within
        `min_poll_interval_s` (the trainer's loop polls every few milliseconds while it waits)."""
        now = time.monotonic()
        if now - self._polled_at < self.min_poll_interval_s:
            return []
        self._polled_at = now
        latest = latest_block(self.ledger.w3)  # one read for every cursor
        head = (latest["number"], bytes(latest["hash"]))
        if head == self._polled_block and not self._fetch_retry_due(now):
            return []  # every state it reads is the head's: a read per pending work, 10 a second, changed nothing
        self._polled_block, self._head_time = head, latest["timestamp"]
        for cursor in self.cursors.values():
            for event in cursor.poll(latest):
                if isinstance(event, Removed):
                    self._digests.clear()
                    self._final_by_event.clear()
                    self._window_ends.clear()
                    continue
                if event.pool_id != self.pool_id:
                    continue
                if isinstance(event, WorkSubmitted):
                    self._remember_digest(WorkId(event.work_id).text, bytes(event.rollout_digest))
                    continue
                if isinstance(event, WorkChallenged):  # its status is read at this poll, window or not
                    self._window_ends.pop(WorkId(event.work_id).text, None)
                    continue
                if getattr(event, "accepted", True) is False:  # a court challenge: nothing to consume
                    continue
                work_id = WorkId(event.work_id).text
                if work_id not in self.consumed and work_id not in self.pending:
                    self.pending.append(work_id)
                    if self.court is not None and self.wait_final and cursor is self.cursors["pool"]:
                        self._final_by_event.add(work_id)
        if self.batches is not None:
            self.batches.poll(latest)
            for leaf_id, digest in self.batches.final_leaves(self._head_time):
                if leaf_id not in self.consumed and leaf_id not in self._leaf_digests:
                    self._leaf_digests[leaf_id] = digest
                    self.pending.append(leaf_id)
        self._settle()
        still_pending: list[str] = []
        decoding: deque[tuple[str, str, Decoding]] = deque()  # fetched, in pending order; decoded as they come
        items, taken = [], []
        for work_id in self.pending:
            if self._unfetched.get(work_id, (0.0, 0.0))[0] > now:  # a file nobody served lately: not every poll
                still_pending.append(work_id)
                continue
            wid = bytes.fromhex(work_id[2:])
            leaf = work_id in self._leaf_digests
            state = "final" if work_id in self._final_by_event or leaf else self._state_of(wid)
            if state == "rejected":
                self.skipped.append(work_id)
                continue
            if state == "wait":
                still_pending.append(work_id)
                continue
            digest = self._leaf_digests.get(work_id) or self._digests.get(work_id) or rollout_digest_of(self.ledger, wid)
            if digest is None:  # the submission's event is not visible yet (or was reorged out)
                still_pending.append(work_id)
                continue
            try:
                data = get_object(self.kubo, digest, timeout=self.fetch_timeout_s)
            except ContentError as exc:
                # each try waits up to fetch_timeout_s and holds up every other file of the poll, so a file that
                # is not served (withheld, and accepted all the same) is tried again ever later, never dropped
                wait = min(2 * self._unfetched.get(work_id, (0.0, UNFETCHED_RETRY_S / 2))[1], UNFETCHED_RETRY_MAX_S)
                self._unfetched[work_id] = (time.monotonic() + wait, wait)
                log.warning("accepted work %s not fetchable yet (next try in %.0f s): %s", work_id, wait, exc)
                still_pending.append(work_id)
                continue
            self._unfetched.pop(work_id, None)
            self._digests.pop(work_id, None)
            self._leaf_digests.pop(work_id, None)
            decoding.append((work_id, state, self.decoder.submit(data)))
            while len(decoding) > DECODING_PER_WORKER * max(1, self.decoder.workers):  # bounds the bytes in flight
                self._take(*decoding.popleft(), items, taken)
        while decoding:
            self._take(*decoding.popleft(), items, taken)
        self.consumed.add(taken)  # one append a poll
        self.pending = still_pending
        self._final_by_event &= set(still_pending)
        followed = set(still_pending) | set(self.unsettled)
        self._window_ends = {w: end for w, end in self._window_ends.items() if w in followed}
        return items

    def _fetch_retry_due(self, now: float) -> bool:
        """A file that could not be fetched is due another try: the one thing a poll does that the head does not
        decide."""
        return any(due <= now for work_id, (due, _) in self._unfetched.items() if work_id in self.pending)

    def _take(self, work_id: str, state: str, decoding: Decoding, items: list[WorkItem], taken: list[str]) -> None:
        """A fetched file's decode: its item appended to `items` and its id to `taken`, or, refused, to `unreadable`."""
        try:
            batch = decoding.result()
        except RolloutFileError as exc:  # a validator accepted a bad file: never train on it
            log.error("accepted work %s is not a valid rollout file: %s", work_id, exc)
            self.unreadable.append(work_id)
            return
        if self.rescore is not None and self._misscored(work_id, batch):
            return
        taken.append(work_id)
        if state == "consume":
            self.unsettled.append(work_id)
        items.append(WorkItem(id=work_id, batch=batch))

    def _misscored(self, work_id: str, batch: RolloutBatch) -> bool:
        """Whether the accepted file `work_id` claims a reward the task does not give (then booked in `misscored`)."""
        try:
            bad = self.rescore(batch)
            why = f"claims rewards the task does not give ({len(bad)} of {len(batch.samples)} samples)" if bad else None
        except Exception as exc:  # noqa: BLE001 - a hostile file the trainer cannot score is not trained on either
            why = f"could not be scored again ({type(exc).__name__}: {exc})"
        if why is None:
            return False
        log.error("accepted work %s %s: not trained on", work_id, why)
        self.misscored.append(work_id)
        return True

    def close(self) -> None:
        """Stop the decoding processes (the consumed log stays as the last poll left it)."""
        self.decoder.close()

    def _remember_digest(self, work_id: str, digest: bytes) -> None:
        self._digests.pop(work_id, None)  # a resubmission after a reorg: the newest event counts
        self._digests[work_id] = digest
        while len(self._digests) > SUBMITTED_DIGESTS_KEPT:
            del self._digests[next(iter(self._digests))]

    def _state_of(self, work_id: bytes) -> str:
        """"final" (consume, settled), "consume" (fast mode: consume, not final yet), "wait" or "rejected"."""
        if self.wait_final and self._window_open(work_id.hex()):
            return "wait"
        work = get_work(self.ledger, work_id)
        status = work.status
        if status not in CONSUMABLE and status != WorkStatus.PENDING:
            return "rejected"
        if self.court is not None:
            if status in CONSUMABLE:
                return "final"  # the court records verdicts in the pool only when they are final
            case = self.court.cases(work_id)
            if case.state == CaseState.VERDICT and case.accepted and not self.wait_final:
                return "consume"
            return "wait"  # no verdict, disputed, or (final mode) not final yet
        if status == WorkStatus.PENDING:
            return "wait"
        self._window_ends["0x" + work_id.hex()] = work.submitted_at + self.challenge_window_s
        if self._window_passed(work.submitted_at):
            return "final"
        return "wait" if self.wait_final else "consume"

    def _window_open(self, hex_id: str) -> bool:
        """A permissioned pool's work whose challenge window is known to be still open at the head."""
        end = self._window_ends.get("0x" + hex_id.removeprefix("0x"))
        return self.court is None and end is not None and self._head_time <= end

    def _window_passed(self, submitted_at: int) -> bool:
        return self._head_time > submitted_at + self.challenge_window_s

    def _settle(self) -> None:
        """Follow consumed, unsettled work to its final verdict; count what ended rejected."""
        still = []
        for work_id in self.unsettled:
            if self._window_open(work_id):  # its status is read once, when the window has passed
                still.append(work_id)
                continue
            wid = bytes.fromhex(work_id[2:])
            work = get_work(self.ledger, wid)
            status = work.status
            if status not in CONSUMABLE and status != WorkStatus.PENDING:
                self.overturned.append(work_id)
                log.warning("consumed work %s was overturned after the trainer learned from it", work_id)
            elif status == WorkStatus.PENDING or (self.court is None and not self._window_passed(work.submitted_at)):
                if self.court is None and status != WorkStatus.PENDING:
                    self._window_ends[work_id] = work.submitted_at + self.challenge_window_s
                still.append(work_id)
        self.unsettled = still

    def state(self) -> dict[str, Any]:
        """The cursors, the small lists, and the consumed log's count (its ids themselves when it is in memory)."""
        return {"cursors": {name: c.state for name, c in self.cursors.items()}, "pending": list(self.pending),
                **self.consumed.state(), "skipped": list(self.skipped), "unreadable": list(self.unreadable),
                "misscored": list(self.misscored), "unsettled": list(self.unsettled), "overturned": list(self.overturned)} | \
            ({"batches": self.batches.state(), "leaf_digests": {k: v.hex() for k, v in self._leaf_digests.items()}}
             if self.batches is not None else {})

    def restore(self, state: dict[str, Any]) -> None:
        cursors = state.get("cursors") or {"pool": state["cursor"]}  # checkpoints before the fast/final modes
        for name, cursor_state in cursors.items():
            if name in self.cursors:
                self.cursors[name].state = cursor_state
        self.pending = list(state.get("pending", []))
        self.consumed.restore(state)
        self.skipped = list(state.get("skipped", []))
        self.unreadable = list(state.get("unreadable", []))
        self.misscored = list(state.get("misscored", []))
        self.unsettled = list(state.get("unsettled", []))
        self.overturned = list(state.get("overturned", []))
        if self.batches is not None and "batches" in state:
            self.batches.restore(state["batches"])
            self._leaf_digests = {k: bytes.fromhex(v) for k, v in state["leaf_digests"].items()}

    def report(self, step: int, waiting: bool) -> None:
        """Workers learn the trainer's step from the chain (published checkpoints); nothing to do."""
