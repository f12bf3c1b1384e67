"""The worker's batched path (docs/protocol.md §3.1, R3.7–R3.13), used by the daemon in a pool whose files settle in
WorkBatches: each file is a leaf of the current epoch, bound to (WorkBatches, pool, worker, step, `epoch << 32 |
counter`) and seeded by the epoch's beacon (R3.9); the worker signs a run of its consecutive leaves, uploads the batch
list (protocol.batchlist) and posts its own batch (R3.8: nobody can censor it), then, once the challenge window after
the posting has closed, claims its runs in counter order by range proof (R3.12).

Everything goes through a crash-safe state file, rewritten atomically (written aside, renamed over) before the step it
records is taken, so a kill -9 resumes where it was:
    leaf written   — the file is on local disk and its leaf (digest, step, samples) is fixed for its counter: a counter
                     is never given another leaf once it may have been signed (R3.11's duplicate is slashable)
    leaf uploaded  — the file is on the worker's Kubo node
    run signed     — the run's signature over leaves already journaled (deterministic: signing again gives the same)
    batch listed   — the list is on Kubo; its batch id is fixed (the list's bytes are canonical)
    batch posted   — `postBatch` mined (after a crash: `batchOf` says whether it was)
Claims read the chain's claim cursor (`nextClaim`): a run below it is paid already, so nothing is claimed twice. A
signed-but-unjournaled run only ever covers journaled leaves, so whatever a crash left, no counter is skipped (a gap
ends the worker's epoch for claims) or given two leaves.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

from ledger_client.chain import batches, errors
from ledger_client.chain.bindings import LeafBody, WorkBatches
from ledger_client.chain.errors import ContractRevert
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state
from ledger_client.ipfs.kubo import KuboClient
from protocol.batchlist import BatchList, encode_batch_list
from protocol.digest import hex_text
from protocol.errors import InvalidInput
from protocol.submission import SubmissionBinding, leaf_binding
from worker.options import DEFAULT_RUN_LEAVES

log = logging.getLogger("proofswarm.worker")



class BatchStateCorrupt(InvalidInput):
    """The batched state file is not one this worker wrote (edited or damaged): the worker refuses to guess (exit 2)."""


class BatchState:
    """What the worker has made, signed, listed, posted in each epoch: {"epochs": {epoch: {"leaves": [...], "runs":
    [...], "batches": [...]}}}; leaf i of an epoch has counter i."""

    def __init__(self, path: Path):
        self.path = path
        self.doc: dict[str, Any] = {"epochs": {}}
        if path.exists():
            try:
                self.doc = json.loads(path.read_text())
                assert isinstance(self.doc.get("epochs"), dict)
            except (json.JSONDecodeError, AssertionError, UnicodeDecodeError):
                raise BatchStateCorrupt(f"{path} is not a batched-work state file; it was edited or damaged — the "
                                        "worker cannot tell which counters it signed: restore it, or move it aside "
                                        "and wait for the next epoch") from None

    def epoch(self, e: int) -> dict[str, Any]:
        return self.doc["epochs"].setdefault(str(e), {"leaves": [], "runs": [], "batches": []})

    def epochs(self) -> list[int]:
        return sorted(int(e) for e in self.doc["epochs"])

    def drop(self, e: int) -> None:
        self.doc["epochs"].pop(str(e), None)

    def save(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class BatchedWork:
    """One worker's batched files in one pool; `make_one` makes a leaf, `post` signs and posts, `claim_due` claims."""

    def __init__(self, ledger: Ledger, pool_id: int, wb: WorkBatches, state_path: Path, kubo: KuboClient,
                 upload: Callable[[KuboClient, bytes], object], files: Path, run_leaves: int = DEFAULT_RUN_LEAVES):
        self.ledger, self.pool_id, self.wb, self.kubo, self.upload = ledger, pool_id, wb, kubo, upload
        self.files = files
        self.run_leaves = max(1, run_leaves)
        self.state = BatchState(state_path)
        self.params = wb.get_params(pool_id)
        self.window = pool_state(ledger, pool_id).challenge_window_s
        self.domain = batches.domain_separator(ledger.w3.eth.chain_id, wb.address)
        self.claimed = 0
        self.voided_leaves: set[tuple[int, int]] = set()

    # ------------------------------------------------------------------ bond

    def lock_bond(self) -> None:
        """Lock the pool's worker bond here (topping up a slashed one); its first epoch is the next one (R3.12)."""
        bond = self.wb.get_bond(self.pool_id, self.ledger.address)
        if bond.bonded and bond.last_epoch == 2**32 - 1 and bond.locked >= self.params.worker_bond:
            return
        more = self.params.worker_bond - (bond.locked if bond.bonded and bond.last_epoch == 2**32 - 1 else 0)
        self.ledger.ensure_stake(more)
        self.wb.lock_bond(self.pool_id)
        log.info("locked a worker bond of %d in WorkBatches for pool %d", more, self.pool_id)

    def first_epoch(self) -> int:
        return self.wb.get_bond(self.pool_id, self.ledger.address).first_epoch

    # ------------------------------------------------------------------ leaves

    def epoch_now(self, now: int) -> int:
        return self.wb.epoch_of(self.pool_id, now)

    def beacon(self, epoch: int) -> bytes:
        """Epoch `epoch`'s beacon, opening the epoch if nobody has (R3.9)."""
        beacon = bytes(self.wb.beacon_of(self.pool_id, epoch))
        if not any(beacon):
            self.wb.open_epoch(self.pool_id)
            beacon = bytes(self.wb.beacon_of(self.pool_id, epoch))
        return beacon

    def next_counter(self, epoch: int) -> int | None:
        """The counter the next leaf of `epoch` gets (None: the epoch holds `maxLeaves` already)."""
        n = len(self.state.epoch(epoch)["leaves"])
        return n if n < self.params.max_leaves else None

    def made_at(self, step: int) -> int:
        """Leaves made on `step`'s policy, in the epochs still held."""
        return sum(leaf["step"] == step for e in self.state.epochs() for leaf in self.state.epoch(e)["leaves"])

    def binding(self, step: int, epoch: int, counter: int, beacon: bytes) -> SubmissionBinding:
        d = self.ledger.deployment
        return leaf_binding(d.chain_id, self.wb.address, self.pool_id, self.ledger.address, step, epoch, counter,
                            beacon)

    def add_leaf(self, epoch: int, counter: int, step: int, data: bytes, samples: int) -> str:
        """Journal the file `data` as leaf `counter` of `epoch` and upload it; returns its digest's hex."""
        leaves = self.state.epoch(epoch)["leaves"]
        if counter != len(leaves):
            raise RuntimeError(f"leaf {counter} of epoch {epoch} is not the next ({len(leaves)})")
        digest = hashlib.sha256(data).digest()
        self.files.mkdir(parents=True, exist_ok=True)
        path = self.files / f"{digest.hex()}.parquet"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        leaves.append({"digest": digest.hex(), "step": step, "samples": samples, "file": str(path), "uploaded": False})
        self.state.save()
        self.upload(self.kubo, data)
        leaves[-1]["uploaded"] = True
        self.state.save()
        return digest.hex()

    # ------------------------------------------------------------------ signing and posting

    def post(self, now_epoch: int, all_leaves: bool) -> int:
        """Sign and post the leaves not yet in a run: of epochs before `now_epoch` all of them (while postable, R3.9),
        of `now_epoch` runs of `run_leaves` (`all_leaves`: the rest too); finish a listing or posting a crash cut
        short, and post again a batch voided as unavailable. Returns the batches posted."""
        posted = 0
        for e in self.state.epochs():
            if e + 1 < now_epoch:
                self._abandon_unposted(e)
                continue
            ep = self.state.epoch(e)
            self._resume_uploads(e, ep)
            while True:
                signed_to = _signed_to(ep)
                left = len(ep["leaves"]) - signed_to
                if left == 0 or (e == now_epoch and not all_leaves and left < self.run_leaves):
                    break
                self._sign(e, ep, signed_to, min(left, self.run_leaves))
            for b in ep["batches"]:
                if not b.get("posted"):
                    posted += self._post_batch(e, ep, b)
            for i, run in enumerate(ep["runs"]):
                if not any(i in b["runs"] for b in ep["batches"] if not b.get("voided")):
                    posted += self._list_and_post(e, ep, [i])
        return posted

    def _resume_uploads(self, e: int, ep: dict) -> None:
        """Leaves journaled before a crash let them reach Kubo: uploaded now (from their local file); an unsigned
        tail whose file is gone is dropped (never signed, so its counters are free again)."""
        signed_to = _signed_to(ep)
        for i, leaf in enumerate(ep["leaves"]):
            if leaf["uploaded"]:
                continue
            path = Path(leaf["file"])
            if not path.exists():
                if i >= signed_to:
                    log.warning("epoch %d: leaf %d's file is gone before it was signed; making counters %d.. again",
                                e, i, i)
                    del ep["leaves"][i:]
                    self.state.save()
                    return
                raise InvalidInput(f"{path}, leaf {i} of epoch {e} (signed), is gone: a validator cannot fetch it")
            self.upload(self.kubo, path.read_bytes())
            leaf["uploaded"] = True
            self.state.save()

    def _sign(self, e: int, ep: dict, first: int, n: int) -> None:
        leaves = [LeafBody(bytes.fromhex(x["digest"]), x["step"], x["samples"]) for x in ep["leaves"][first:first + n]]
        run = batches.sign_run(self.ledger.account, self.domain, self.pool_id, e, first, leaves)
        ep["runs"].append({"first": first, "count": n, "r": run.r.hex(), "vs": run.vs.hex()})
        self.state.save()

    def run_of(self, e: int, ep: dict, i: int) -> batches.Run:
        r = ep["runs"][i]
        leaves = tuple(LeafBody(bytes.fromhex(x["digest"]), x["step"], x["samples"])
                       for x in ep["leaves"][r["first"]:r["first"] + r["count"]])
        top = batches.root([batches.leaf_hash(x) for x in leaves])
        digest = batches.run_digest(self.domain, self.pool_id, e, r["first"], r["count"], top)
        return batches.Run(self.pool_id, e, r["first"], self.ledger.address, leaves, top, digest,
                           bytes.fromhex(r["r"]), bytes.fromhex(r["vs"]))

    def _list_and_post(self, e: int, ep: dict, runs: list[int]) -> int:
        attempt = sum(1 for b in ep["batches"] if set(b["runs"]) & set(runs))
        signed = [self.run_of(e, ep, i) for i in runs]
        data = encode_batch_list(BatchList(self.pool_id, e, tuple(batches.listed(r) for r in signed), attempt))
        list_digest = bytes(self.upload(self.kubo, data))
        _, ref = batches.batch(signed, list_digest)
        b = {"runs": runs, "attempt": attempt, "list": list_digest.hex(), "root": ref[3].hex(), "count": ref[2]}
        ep["batches"].append(b)
        self.state.save()
        return self._post_batch(e, ep, b)

    def ref(self, e: int, b: dict) -> tuple:
        return (self.pool_id, e, b["count"], bytes.fromhex(b["root"]), bytes.fromhex(b["list"]))

    def _post_batch(self, e: int, ep: dict, b: dict) -> int:
        ref = self.ref(e, b)
        posted_at, voided = self.wb.batch_of(self.wb.batch_id_of(ref))
        if not posted_at:
            try:
                self.wb.post_batch(ref)
            except errors.EpochNotPostable as exc:
                log.warning("epoch %d's runs %s can no longer be posted (%s): they are not paid", e, b["runs"], exc)
                b["dead"] = True
                self.state.save()
                return 0
            posted_at, voided = self.wb.batch_of(self.wb.batch_id_of(ref))
            log.info("posted a batch of epoch %d: runs %s (%d leaves), list %s", e,
                     [ep["runs"][i]["first"] for i in b["runs"]], sum(ep["runs"][i]["count"] for i in b["runs"]),
                     hex_text(bytes.fromhex(b["list"])))
        b["posted"], b["posted_at"], b["voided"] = True, posted_at, voided
        self.state.save()
        return 1

    def _abandon_unposted(self, e: int) -> None:
        """Leaves of an epoch past posting (R3.9: its batches are posted by the next epoch's end) that never reached
        a posted batch are not paid; the epoch is kept while its posted batches wait to be claimed."""
        ep = self.state.epoch(e)
        lost = len(ep["leaves"]) - sum(ep["runs"][i]["count"] for b in ep["batches"] if b.get("posted")
                                       and not b.get("voided") for i in b["runs"])
        if lost and not ep.get("abandoned"):
            log.warning("epoch %d ended before %d of its leaves were posted: they are not paid", e, lost)
            ep["abandoned"] = True
            self.state.save()

    # ------------------------------------------------------------------ claims

    def claim_due(self, now: int) -> int:
        """Claim, in counter order, every posted run whose batch's window has closed (R3.12), around counters a
        validator voided; stop at the first run not claimable yet (a later one would close the counters before it).
        Returns the amount claimed."""
        amount = 0
        now_epoch = self.epoch_now(now)
        self._watch_voids(now, now_epoch)
        for e in self.state.epochs():
            ep = self.state.epoch(e)
            cursor_epoch, cursor = self.wb.next_claim(self.pool_id, self.ledger.address)
            done = self._claimed_through(e, cursor_epoch, cursor)
            runs = sorted(range(len(ep["runs"])), key=lambda i: ep["runs"][i]["first"])
            for i in runs:
                r = ep["runs"][i]
                if r["first"] + r["count"] <= done:
                    continue
                b = self._live_batch(e, ep, i)
                if b is None:  # not posted (yet), or its batches were voided
                    if e + 1 >= now_epoch:
                        return amount  # may still be posted: nothing after it is claimed before it
                    continue
                if now <= b["posted_at"] + self.window:
                    return amount
                got = self._claim_run(e, ep, i, b, max(done, r["first"]))
                if got is None:
                    return amount
                amount += got
                done = r["first"] + r["count"]
            if e + 1 < now_epoch and self._all_claimed(e, ep):  # nothing of it can be posted or paid any more
                self.state.drop(e)
                self.state.save()
        self.claimed += amount
        return amount

    def _watch_voids(self, now: int, now_epoch: int) -> None:
        """Mark the batches a validator voided while their epoch can still be posted, so that `post` posts their runs
        again (a void found only at claim time, after the window, may come when the epoch is past posting)."""
        for e in self.state.epochs():
            if e + 1 < now_epoch:
                continue
            for b in self.state.epoch(e)["batches"]:
                if b.get("posted") and not (b.get("voided") or b.get("dead")) and now <= b["posted_at"] + self.window:
                    if self.wb.batch_of(self.wb.batch_id_of(self.ref(e, b))).voided:
                        log.warning("batch of epoch %d (runs %s) was voided by a validator; posting its runs again",
                                    e, b["runs"])
                        b["voided"] = True
                        self.state.save()

    def _claimed_through(self, e: int, cursor_epoch: int, cursor: int) -> int:
        """The counter epoch `e`'s next claim starts from: all of it is closed once the cursor is in a later epoch."""
        never = cursor_epoch == 0 and cursor == 0
        if never or cursor_epoch < e:
            return 0
        return cursor if cursor_epoch == e else 2**32

    def _all_claimed(self, e: int, ep: dict) -> bool:
        cursor_epoch, cursor = self.wb.next_claim(self.pool_id, self.ledger.address)
        done = self._claimed_through(e, cursor_epoch, cursor)
        return all(r["first"] + r["count"] <= done or self._live_batch(e, ep, i) is None
                   for i, r in enumerate(ep["runs"]))

    def _live_batch(self, e: int, ep: dict, i: int) -> dict | None:
        """The posted batch holding run `i` that is not voided (re-read from the chain: a validator may void it)."""
        for b in ep["batches"]:
            if i in b["runs"] and b.get("posted") and not b.get("voided") and not b.get("dead"):
                _, voided = self.wb.batch_of(self.wb.batch_id_of(self.ref(e, b)))
                if voided:
                    log.warning("batch of epoch %d (runs %s) was voided by a validator; posting its runs again", e,
                                b["runs"])
                    b["voided"] = True
                    self.state.save()
                    continue
                return b
        return None

    def _claim_run(self, e: int, ep: dict, i: int, b: dict, start: int) -> int | None:
        """Claim run `i` from counter `start` in segments around voided counters; None when the chain refused."""
        run = self.run_of(e, ep, i)
        ref = self.ref(e, b)
        runs = [self.run_of(e, ep, k) for k in b["runs"]]
        position = b["runs"].index(i)
        proof = batches.range_proof([x.node() for x in runs], position, 1)
        end = run.first_counter + len(run.leaves)
        paid, c = 0, start
        while c < end:
            if self.wb.is_void(self.pool_id, self.ledger.address, e, c):
                self.voided_leaves.add((e, c))
                c += 1
                continue
            hi = c
            while hi < end and not self.wb.is_void(self.pool_id, self.ledger.address, e, hi):
                hi += 1
            before = self.ledger.token.balance_of(self.ledger.address)
            try:
                self.wb.claim(ref, position, proof, run.signed(), *run.claim_args(c, hi - c))
            except errors.InsufficientBudget as exc:
                log.warning("claim of epoch %d leaves %d..%d waits: %s", e, c, hi - 1, exc)
                return None
            except ContractRevert as exc:
                if isinstance(exc, errors.NotNextCounter) and \
                        tuple(self.wb.next_claim(self.pool_id, self.ledger.address)) > (e, c):
                    c = hi  # claimed before a crash
                    continue
                log.error("claim of epoch %d leaves %d..%d refused: %s", e, c, hi - 1, exc)
                return None
            got = self.ledger.token.balance_of(self.ledger.address) - before
            paid += got
            log.info("claimed epoch %d leaves %d..%d: %d", e, c, hi - 1, got)
            c = hi
        return paid


def _signed_to(ep: dict) -> int:
    """The counter after the last signed run of the epoch (runs are signed in order, over consecutive leaves)."""
    return max((r["first"] + r["count"] for r in ep["runs"]), default=0)


def release_batch_bond(ledger: Ledger, pool_id: int) -> dict:
    """`worker deallocate --batch-bond`: stop the bond counting after the current epoch (`requestExit`) and, once its
    last epoch's batches are past their windows (R3.13), return it to free bonded stake (`unlockBond`). Returns what
    was done: the exit requested and when the bond unlocks, or the bond returned. A pool without batches or no bond is
    a `UsageError`; a bond whose exit was requested before and is not unlockable yet a `LedgerError` naming when."""
    from cli.errors import UsageError
    from cli.output import date, tokens
    from ledger_client.chain.errors import LedgerError
    from ledger_client.chain.queries import chain_time

    wb = batches.batches_of(ledger, pool_id)
    if wb is None:
        raise UsageError(f"pool {pool_id} does not settle in batches: no WorkBatches bond to release")
    bond = wb.get_bond(pool_id, ledger.address)
    if not bond.bonded or bond.locked == 0:
        raise UsageError(f"{ledger.address} has no WorkBatches bond locked in pool {pool_id}")
    requesting = bond.last_epoch == 2**32 - 1
    if requesting:
        wb.request_exit(pool_id)
        bond = wb.get_bond(pool_id, ledger.address)
    epoch_length = wb.get_params(pool_id).epoch_length
    ready = wb.genesis_of(pool_id) + (bond.last_epoch + 2) * epoch_length + pool_state(ledger, pool_id).challenge_window_s + 1
    now = chain_time(ledger)
    if now < ready and requesting:
        return {"pool_id": pool_id, "exit_requested": True, "last_epoch": bond.last_epoch, "batch_bond": bond.locked,
                "unlockable_at": ready}
    if now < ready:
        raise LedgerError(f"the WorkBatches bond of {tokens(bond.locked)} in pool {pool_id} counts through epoch "
                          f"{bond.last_epoch}: it unlocks once that epoch's batches are past their windows, from "
                          f"{date(ready)} (in {ready - now} s)")
    wb.unlock_bond(pool_id)
    return {"pool_id": pool_id, "batch_bond_unlocked": bond.locked, "free_bonded": ledger.stake.bonded_of(ledger.address)}
