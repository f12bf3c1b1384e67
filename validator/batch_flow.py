"""A validator's batched path (docs/protocol.md §3.1, R3.8–R3.10), beside the daemon's `submitWork` one in a pool whose
files settle in WorkBatches: it follows `BatchPosted`, fetches each batch's list (protocol.batchlist) and rebuilds the
batch from it (ledger_client.chain.batches.check_posted) — a list that cannot be fetched in `fetch_attempts` tries (or
before the window would close) or does not rebuild its batch is voided (`voidBatch`) —, then hands each leaf to the
daemon as a `Submission` bound to WorkBatches, which fetches and checks its file as it does a `submitWork` file
(validator.checks). A counter a worker gave two different leaves in runs it signed (seen in any two lists) is proven
(`proveDuplicate`, R3.11). A leaf whose step was stale when its batch was posted is challenged STALE without a fetch. A good
leaf needs no transaction (acceptance is optimistic); a bad one is challenged within the window with its proofs
(`challenge`: the run's place in the batch, the leaf's in the run), which voids it and slashes its worker's bond.

Restart-safe as the daemon is: a fetched list is kept in the state folder before its leaves are handed on; the lists
still to fetch and the counters seen are saved before the cursor is committed; the daemon's retry book holds the leaves left to check; the
chain (`batchOf`, `isVoid`) says what is settled, so a redelivered batch or leaf is harmless.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from ledger_client.chain import batches, errors
from ledger_client.chain.bindings import WorkBatches
from ledger_client.chain.errors import ContractRevert
from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.ledger import Ledger
from ledger_client.ipfs.content import ContentError, ContentUnavailable, get_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.batchlist import BatchListError, decode_batch_list
from protocol.digest import hex_text
from protocol.pool import PoolState
from protocol.submission import leaf_binding
from protocol.verdicts import Reason
from validator.config import DaemonConfig
from validator.cursor_journal import CursorJournal
from validator.cursor_journal import prepare as prepare_cursor
from validator.outcome import CheckOutcome, Submission, publish_evidence

log = logging.getLogger("proofswarm.validator")


class BatchFlow:
    """The batched leaves of one permissioned pool, for `ValidatorDaemon`."""

    def __init__(self, ledger: Ledger, wb: WorkBatches, config: DaemonConfig, pool: PoolState, kubo: KuboClient):
        self.ledger, self.wb, self.config, self.pool, self.kubo = ledger, wb, config, pool, kubo
        self.dir = config.state_dir / "batches"
        self.dir.mkdir(parents=True, exist_ok=True)
        cursor_path = config.state_dir / "batch_cursor.json"
        prepare_cursor(cursor_path)
        self.cursor = EventCursor(wb, ["BatchPosted"], cursor_path, confirmations=config.confirmations,
                                  start_block=ledger.deployment.block, batch_blocks=ledger.logs.page_blocks,
                                  pool_id=config.pool_id)
        self.cursor_journal = CursorJournal(cursor_path, self.cursor.state)
        self.pending_path = self.dir / "pending.json"
        self.pending: dict[str, dict[str, Any]] = json.loads(self.pending_path.read_text()) \
            if self.pending_path.exists() else {}
        """Batches whose list is still to be fetched: batch id → its record (ref, posting, attempts, next try)."""
        self.domain = batches.domain_separator(ledger.deployment.chain_id, wb.address)
        self.counters_path = self.dir / "counters.json"
        self.counters: dict[str, dict[str, list[str]]] = json.loads(self.counters_path.read_text()) \
            if self.counters_path.exists() else {}
        """"worker:epoch" → counter → [leaf hash, batch id, run position] of the leaf first seen for it: a second leaf for
        the counter in another run the worker signed is a fraud proof (R3.11)."""
        self.duplicates = 0
        self._published: dict[int, int] = {}
        """Step → the block its checkpoint was published in (found once, never changes short of a reorg)."""
        self.voided = 0

    # ------------------------------------------------------------------ lists

    def poll(self, latest: int, now: int) -> list[Submission]:
        """The leaves of the batches posted since the last poll and of the lists fetched now (a list that will not
        come, or does not rebuild its batch, is voided)."""
        for e in self.cursor.poll(latest):
            if isinstance(e, Removed) or e.pool_id != self.config.pool_id:
                continue
            self.pending.setdefault(bytes(e.batch_id).hex(), {
                "ref": [e.pool_id, e.epoch, e.count, bytes(e.root).hex(), bytes(e.list_digest).hex()],
                "block": e.meta.block_number, "block_hash": bytes(e.meta.block_hash).hex(), "attempts": 0,
                "next_at": 0.0, "posted_at": 0})
        subs: list[Submission] = []
        for batch_id, rec in list(self.pending.items()):
            if rec["next_at"] > time.time():
                continue
            subs += self._open(bytes.fromhex(batch_id), rec, now)
        return subs

    def _ref(self, rec: dict) -> tuple:
        pool_id, epoch, count, top, digest = rec["ref"]
        return (pool_id, epoch, count, bytes.fromhex(top), bytes.fromhex(digest))

    def _open(self, batch_id: bytes, rec: dict, now: int) -> list[Submission]:
        ref = self._ref(rec)
        posted_at, voided = self.wb.batch_of(batch_id)
        if not posted_at or voided or now > posted_at + self.pool.challenge_window_s:
            del self.pending[batch_id.hex()]  # reorged away, voided, or past judging
            return []
        rec["posted_at"] = posted_at
        try:
            data = get_object(self.kubo, ref[4], timeout=self.config.fetch_timeout_s)
            runs = batches.check_posted(decode_batch_list(data), self.domain, ref)
        except ContentUnavailable as exc:
            rec["attempts"] += 1
            rec["next_at"] = time.time() + self.config.retry_backoff_s
            late = now + self.config.retry_backoff_s + self.config.fetch_timeout_s + self.config.verdict_margin_s \
                >= posted_at + self.pool.challenge_window_s
            if rec["attempts"] >= self.config.fetch_attempts or late:
                self._void(batch_id, ref, f"its list is not available ({rec['attempts']} fetch attempts: {exc})")
            return []
        except (BatchListError, ContentError) as exc:
            self._void(batch_id, ref, f"its list is not a list of this batch: {exc}")
            return []
        (self.dir / f"{batch_id.hex()}.list").write_bytes(data)
        meta = {**rec, "batch_id": batch_id.hex()}
        tmp = self.dir / f".{batch_id.hex()}.json.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, self.dir / f"{batch_id.hex()}.json")
        del self.pending[batch_id.hex()]
        self._duplicates(batch_id, ref[1], runs)
        beacon = bytes(self.wb.beacon_of(ref[0], ref[1]))
        d = self.ledger.deployment
        subs = []
        for run in runs:
            for k, leaf in enumerate(run.leaves):
                counter = run.first_counter + k
                binding = leaf_binding(d.chain_id, self.wb.address, ref[0], run.worker, leaf.step, ref[1], counter,
                                       beacon)
                subs.append(Submission(binding.work_id, ref[0], run.worker, leaf.step, leaf.samples, binding.nonce,
                                       bytes(leaf.rollout_digest), submitted_at=posted_at, block_number=rec["block"],
                                       block_hash=bytes.fromhex(rec["block_hash"]), contract=self.wb.address,
                                       seed_hash=beacon, batch_id=batch_id))
        log.info("batch %s of epoch %d: %d runs, %d leaves to check", hex_text(batch_id), ref[1], len(runs),
                 len(subs))
        return subs

    def _duplicates(self, batch_id: bytes, epoch: int, runs: list[batches.Run]) -> None:
        """Record each leaf's counter; prove every counter a worker gave two different leaves in runs it signed
        (`proveDuplicate`: the counter voided, the worker slashed, the bounty to this validator, R3.11)."""
        for position, run in enumerate(runs):
            seen = self.counters.setdefault(f"{run.worker}:{epoch}", {})
            for k, leaf in enumerate(run.leaves):
                counter = run.first_counter + k
                h = batches.leaf_hash(leaf).hex()
                first = seen.setdefault(str(counter), [h, batch_id.hex(), position])
                if first[0] == h:
                    continue
                other = batches.runs_of_list(decode_batch_list((self.dir / f"{first[1]}.list").read_bytes()),
                                             self.domain)[first[2]]
                try:
                    self.wb.prove_duplicate(self.config.pool_id, run.worker, epoch, counter, other.leaf(counter),
                                            run.leaf(counter))
                except (errors.AlreadyVoided, errors.ChallengerNotIndependent) as exc:
                    log.info("counter %d of %s in epoch %d: not proven (%s)", counter, run.worker, epoch, exc)
                    continue
                self.duplicates += 1
                log.warning("worker %s signed two leaves for counter %d of epoch %d: proven (proveDuplicate)",
                            run.worker, counter, epoch)

    def _void(self, batch_id: bytes, ref: tuple, why: str) -> None:
        self.pending.pop(batch_id.hex(), None)
        try:
            self.wb.void_batch(ref)
        except (errors.BatchIsVoid, errors.WindowClosed, errors.UnknownBatch) as exc:
            log.info("batch %s: not voided (%s)", hex_text(batch_id), exc)
            return
        self.voided += 1
        log.warning("voided batch %s of epoch %d: %s", hex_text(batch_id), ref[1], why)

    def finish_poll(self, now: int) -> None:
        """Save the lists still to fetch and the counters seen (before the cursor is committed); forget the counters
        of epochs no batch can be posted for any more (R3.9)."""
        epoch = self.wb.epoch_of(self.config.pool_id, now)
        self.counters = {k: v for k, v in self.counters.items() if int(k.rsplit(":", 1)[1]) + 1 >= epoch}
        for path, doc in ((self.pending_path, self.pending), (self.counters_path, self.counters)):
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, path)

    def commit(self) -> None:
        self.cursor_journal.commit(self.cursor.state)

    def forget_failed_poll(self) -> None:
        self.cursor.state = self.cursor_journal.saved()

    def close(self) -> None:
        self.cursor_journal.close()

    # ------------------------------------------------------------------ leaves

    def _meta(self, s: Submission) -> dict:
        return json.loads((self.dir / f"{s.batch_id.hex()}.json").read_text())

    def wants(self, s: Submission) -> tuple[bool, int]:
        """Whether the leaf still wants a verdict (its batch not voided, its window open, the leaf not voided) and
        when its batch was posted."""
        posted_at, voided = self.wb.batch_of(s.batch_id)
        epoch, counter = s.nonce >> 32, s.nonce & 0xFFFFFFFF
        if not posted_at or voided or self.ledger.w3.eth.get_block("latest")["timestamp"] > \
                posted_at + self.pool.challenge_window_s:
            return False, posted_at
        return not self.wb.is_void(s.pool_id, s.worker, epoch, counter), posted_at

    def precheck(self, s: Submission) -> CheckOutcome | None:
        """STALE without a fetch when the leaf's step was more than the async level behind the pool's latest step when
        its batch was posted — step + async level + 1 was published at or before the posting's block (nothing on-chain
        pins a leaf's step, as `submitWork` does: R3.6). Read from the event logs, which every node keeps."""
        newer = s.step + self.pool.async_level + 1
        block = self._published.get(newer)
        if block is None:
            event = self.ledger.logs.newest(self.ledger.pool.contract.events.CheckpointPublished,
                                            {"poolId": s.pool_id, "step": newer}, self.ledger.deployment.block)
            if event is None:
                return None
            block = self._published[newer] = event["blockNumber"]
        if block <= s.block_number:
            return CheckOutcome(False, Reason.STALE, f"leaf of step {s.step}, posted after step {newer} was published "
                                                     f"(async level {self.pool.async_level})")
        return None

    def verdict(self, s: Submission, outcome: CheckOutcome) -> str | None:
        """Challenge a bad leaf with its proofs (R3.10); a good one needs nothing. The verdict ("accepted",
        "challenged") or None when the chain settled the leaf meanwhile."""
        wanted, _ = self.wants(s)
        if not wanted:
            return None
        if outcome.ok:
            return "accepted"
        meta = self._meta(s)
        ref = self._ref(meta)
        bl = decode_batch_list((self.dir / f"{s.batch_id.hex()}.list").read_bytes())
        runs = batches.runs_of_list(bl, self.domain)
        counter = s.nonce & 0xFFFFFFFF
        position = next(i for i, r in enumerate(runs) if r.worker == s.worker
                        and r.first_counter <= counter < r.first_counter + len(r.leaves)
                        and r.leaves[counter - r.first_counter].rollout_digest == s.rollout_digest)
        run = runs[position]
        proof = batches.range_proof([r.node() for r in runs], position, 1)
        evidence = publish_evidence(self.kubo, s, outcome, self.ledger.address)
        try:
            self.wb.challenge(ref, position, proof, s.worker, counter, run.leaf(counter), int(outcome.reason), evidence)
        except ContractRevert as exc:
            if isinstance(exc, (errors.AlreadyVoided, errors.WindowClosed, errors.BatchIsVoid)):
                return None
            raise
        return "challenged"
