"""A court validator's keeper duty in a pool with forced errors (docs/protocol.md R9.28): once an epoch's reveal
window has closed, settle the forced errors of the files it saw judged, charge the drawn auditors that let one stand,
and report the validators that withheld their link — calls anyone may send and nobody is paid to (what they take feeds
the pool's verification budget, which pays the jackpots), so every honest validator sends them, staggered.

What the keeper knows comes from the court's events the daemon reads anyway (`saw_verdict`, `saw_dispute`,
`saw_void`): nothing is read while no epoch's window has closed. Its book is the court duties' (validator.court:
`settle`, `charge`, `silence`, the chain holders), journaled at each save: a kill -9 after a transaction and before the
save sends it again only as an estimate, which the contract refuses (`AlreadySettled`, `NotChargeable`, `NotSilent`)
and the keeper books as done — no call is mined twice, none is forgotten. Each step sends at most `MAX_SENDS`
transactions and examines at most `MAX_FILES` files; the rest waits for the next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ledger_client.chain import errors
from ledger_client.chain.errors import ContractRevert, TransactionFailed
from ledger_client.chain.queries import ZERO_ADDRESS
from protocol.hashchain import Role, drawn
from protocol.pool import CaseState

log = logging.getLogger("proofswarm.validator")

MAX_SENDS = 16
"""Transactions one keeper step sends at most (`settle` costs up to ~230k gas, `chargeAuditor` ~78k, `reportSilence`
~36k: R9.25)."""
MAX_FILES = 256
"""Files one keeper step examines at most (one `isForced` read each)."""
GRACE_S = 3
"""Seconds a validator leaves the catcher of a forced error (paid the jackpot by its `settle`) before settling it
itself; each validator adds its own offset of up to as many again (validator.court_flow.stagger)."""
RECHECK_S = 30
"""A forced error whose case is not final yet (a dispute still open) is looked at again this often."""

Commits = Callable[[int], tuple[list[tuple[str, int, int]], int]]
"""Reads the validator chains committed from a block on: ([(validator, first epoch, end epoch)], the next block)."""


class Keeper:
    """Settles, charges and reports for one validator in one pool; `step(now)` at each poll."""

    def __init__(self, chain: Any, court: Any, book: Any, save: Callable[[], Any], me: str,
                 stagger: Callable[[str, bytes, int], int], commits: Commits | None = None):
        self.chain, self.fe, self.court, self.book, self.save, self.me = chain, chain.fe, court, book, save, me
        self.stagger = stagger
        self.commits = commits or self._read_commits
        self._not_before: dict[str, int] = {}
        """Forced errors whose case was not final, and when to look again (memory: a restart looks at once)."""
        self._next: float | None = None
        """The earliest chain time anything booked is due (None: to be computed from the book)."""

    # ------------------------------------------------------------------ what the daemon saw

    def saw_verdict(self, work_id: bytes, submitted_at: int, judge: str, accepted: bool) -> None:
        """Book a judged file (its settlement) and its epoch (the silence of its validators)."""
        key = work_id.hex()
        if key not in self.book.settle:
            self.book.settle[key] = [submitted_at, judge, ZERO_ADDRESS, accepted]
            self._earlier(self._due(key, self.book.settle[key]))
        epoch = str(self.chain.epoch(submitted_at))
        if epoch not in self.book.silence:
            due = self.chain.reveal_window(int(epoch))[1] + 1 + GRACE_S
            self.book.silence[epoch] = [due + self.stagger(self.me, int(epoch).to_bytes(32, "big"), GRACE_S), []]
            self._earlier(self.book.silence[epoch][0])

    def saw_dispute(self, work_id: bytes, disputer: str) -> None:
        entry = self.book.settle.get(work_id.hex())
        if entry is not None and entry[2] != disputer:
            self.book.settle[work_id.hex()] = [entry[0], entry[1], disputer, *entry[3:]]
            self._next = None  # a disputer that is this validator settles its catch without the grace

    def saw_void(self, work_id: bytes) -> None:
        self.book.settle.pop(work_id.hex(), None)

    def due(self, now: int) -> bool:
        """Whether anything is due (from memory: an idle keeper asks the chain nothing, and a poll compares one
        number once the book's earliest due time is known)."""
        if self._next is None:
            self._next = min([*(self._due(k, e) for k, e in self.book.settle.items()),
                              *(d for d, _ in self.book.silence.values()),
                              *([0] if self.book.charge else [])], default=float("inf"))
        return now >= self._next

    def _earlier(self, due: int) -> None:
        if self._next is not None:
            self._next = min(self._next, due)

    # ------------------------------------------------------------------ the step

    def step(self, now: int) -> dict[str, int]:
        """Send what is due, at most MAX_SENDS transactions; returns how many of each were sent."""
        sent = {"settled": 0, "charged": 0, "reported": 0}
        if not self.due(now):
            return sent
        links: dict[tuple[str, int], bytes] = {}
        self._refresh_holders()
        budget = [MAX_SENDS, MAX_FILES]
        jackpots = self._settle_files(now, sent, budget)
        self._charge_auditors(now, sent, budget, links)
        self._report_silence(now, sent, budget, links)
        self._next = None
        if jackpots and self.fe.credits(self.me):
            self.fe.withdraw()
        return sent

    def _catcher(self, entry: list) -> bool:
        """Whether this validator said the file invalid (the judge that challenged it, or the disputer of an
        attestation): its `settle` pays it the jackpot."""
        _, judge, disputer, *rest = entry
        if not rest:  # booked before verdicts were: only files this validator said invalid were
            return True
        accepted = rest[0]
        return (judge == self.me and not accepted) or (disputer == self.me and accepted)

    def _closes(self, submitted_at: int) -> int:
        return self.chain.reveal_window(self.chain.epoch(submitted_at))[1]

    def _due(self, key: str, entry: list) -> int:
        due = self._closes(entry[0]) + 1
        if not self._catcher(entry):
            due += GRACE_S + self.stagger(self.me, bytes.fromhex(key), GRACE_S)
        return max(due, self._not_before.get(key, 0))

    def _settle_files(self, now: int, sent: dict[str, int], budget: list[int]) -> int:
        jackpots = 0
        for key, entry in list(self.book.settle.items()):
            if budget[0] <= 0 or budget[1] <= 0:
                break
            if now < self._due(key, entry):
                continue
            budget[1] -= 1
            outcome = self._owed(bytes.fromhex(key), entry[0])
            if outcome == "pending":  # the epoch's beacon is not recorded yet (R9.29): nothing can be drawn
                self._not_before[key] = now + RECHECK_S
                continue
            if outcome is None:
                self.book.settle.pop(key)
                continue
            case = self.court.cases(bytes.fromhex(key))
            if case.state == CaseState.VOID:
                self.book.settle.pop(key)
                continue
            if case.state != CaseState.FINAL:
                self._not_before[key] = now + RECHECK_S
                continue
            submitted_at, judge, disputer = entry[:3]
            try:
                self.fe.settle(bytes.fromhex(key), judge, disputer)
            except TransactionFailed:  # another validator's settle was mined first: the next step sees it
                self._not_before[key] = now + RECHECK_S
                continue
            except ContractRevert as exc:
                if isinstance(exc, (errors.OutsideRevealWindow, errors.CaseNotFinal, errors.BeaconPending)):  # not yet
                    self._not_before[key] = now + RECHECK_S
                    continue
                if not isinstance(exc, errors.AlreadySettled):
                    log.warning("work 0x%s: not settled: %s", key, exc)
                self.book.settle.pop(key)
                self._not_before.pop(key, None)
                continue
            budget[0] -= 1
            sent["settled"] += 1
            self.book.settle.pop(key)
            self._not_before.pop(key, None)
            catcher = self._catcher(entry)
            jackpots += catcher and outcome == "forced"
            log.info("work 0x%s: settled its forced error (%s, %s)", key, outcome,
                     "the jackpot is ours" if catcher and outcome == "forced" else
                     "accepted: its worker loses" if case.accepted else "caught")
            if outcome == "forced" and case.accepted and disputer == ZERO_ADDRESS:
                self.book.charge[key] = [submitted_at, judge, []]
            self.save()
        return jackpots

    def _owed(self, work_id: bytes, submitted_at: int) -> str | None:
        """What settling the file would find: "forced", "withheld" (its worker's chain covers the epoch, its link was
        not revealed and its bond here is not spent yet), "pending" (the epoch's beacon is not known yet), or None (no
        `settle` is worth its gas)."""
        try:
            return "forced" if self.fe.is_forced(work_id) else None
        except errors.BeaconPending:
            return "pending"
        except errors.NotRevealed as exc:
            worker, epoch = exc.args_dict["account"], self.chain.epoch(submitted_at)
            chain = self.fe.get_chain(self.chain.pool_id, Role.WORKER, worker)
            return "withheld" if chain.first_epoch <= epoch <= chain.end_epoch and chain.locked else None

    def _charge_auditors(self, now: int, sent: dict[str, int], budget: list[int],
                         links: dict[tuple[str, int], bytes]) -> None:
        """`chargeAuditor` each validator drawn for an accepted, undisputed forced error (its revealed link selects
        the file, or it withheld the link) other than its judge and this validator; the contract checks the rest (the
        case's set, not the worker) and refuses a charge twice."""
        bps = self.chain.params.audit_bps
        for key, (submitted_at, judge, done) in list(self.book.charge.items()):
            epoch = self.chain.epoch(submitted_at)
            work_id = bytes.fromhex(key)
            beacon = self.chain.beacon(epoch)
            if beacon is None:  # pending (R9.29): the draws cannot be known yet; a settled file's never is
                continue
            finished = True
            for validator in self._holders(epoch):
                if validator in (judge, self.me) or validator in done:
                    continue
                link = self._link(links, validator, epoch)
                if link != bytes(32) and not drawn(link, beacon, work_id, bps):
                    continue
                if budget[0] <= 0:
                    finished = False
                    break
                try:
                    self.fe.charge_auditor(work_id, validator)
                    budget[0] -= 1
                    sent["charged"] += 1
                    log.info("work 0x%s: charged %s, drawn to audit it, for letting its forced error stand", key,
                             validator)
                except TransactionFailed:
                    finished = False
                    break
                except errors.NotChargeable:
                    pass
                done = [*done, validator]
                self.book.charge[key] = [submitted_at, judge, done]
                self.save()
            if finished:
                self.book.charge.pop(key)

    def _report_silence(self, now: int, sent: dict[str, int], budget: list[int],
                        links: dict[tuple[str, int], bytes]) -> None:
        """`reportSilence` each validator (but this one) whose chain covers a closed epoch and that did not reveal its
        link; the contract refuses a report twice."""
        for key, (due, done) in list(self.book.silence.items()):
            if now < due:
                continue
            epoch, finished = int(key), True
            for validator in self._holders(epoch):
                if validator == self.me or validator in done:
                    continue
                if self._link(links, validator, epoch) == bytes(32):
                    if budget[0] <= 0:
                        finished = False
                        break
                    try:
                        self.fe.report_silence(self.chain.pool_id, validator, epoch)
                        budget[0] -= 1
                        sent["reported"] += 1
                        log.info("epoch %d: reported %s, which did not reveal its link", epoch, validator)
                    except TransactionFailed:
                        finished = False
                        break
                    except errors.NotSilent:
                        pass
                    done = [*done, validator]
                    self.book.silence[key] = [due, done]
                    self.save()
            if finished:
                self.book.silence.pop(key)

    # ------------------------------------------------------------------ the validators' chains

    def _link(self, links: dict[tuple[str, int], bytes], validator: str, epoch: int) -> bytes:
        if (validator, epoch) not in links:
            links[validator, epoch] = bytes(self.fe.link_of(self.chain.pool_id, Role.VALIDATOR, validator, epoch))
        return links[validator, epoch]

    def _holders(self, epoch: int) -> list[str]:
        """The validators with a committed chain that covers `epoch`."""
        return sorted(v for v, spans in self.book.chains.items() if any(a <= epoch <= b for a, b in spans))

    def _refresh_holders(self) -> None:
        commits, self.book.chains_block = self.commits(self.book.chains_block)
        for validator, first, end in commits:
            spans = self.book.chains.get(validator, [])
            if [first, end] not in spans:
                self.book.chains[validator] = [*spans, [first, end]]

    def _read_commits(self, from_block: int) -> tuple[list[tuple[str, int, int]], int]:
        """The pool's `ChainCommitted` events of validators from `from_block` to the head (read only when something
        is due: one request a page)."""
        ledger = self.chain.ledger
        head = ledger.w3.eth.block_number
        start = max(from_block, ledger.deployment.block)
        if start > head:
            return [], start
        events = ledger.logs.read(self.fe.contract.events.ChainCommitted, {"poolId": self.chain.pool_id}, start, head)
        return [(e["args"]["account"], e["args"]["firstEpoch"], e["args"]["endEpoch"]) for e in events
                if e["args"]["role"] == Role.VALIDATOR], head + 1
