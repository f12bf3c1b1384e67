"""A validator's part in a court pool (the pool's judge is the ValidatorCourt), as the daemon runs it each poll.

The daemon finds the files and checks them; `CourtFlow` says which checks the court wants and acts on their
outcomes. First verdicts go to the court, only for submissions assigned to this validator or, after the assigned
window, standing in for a silent one; the court's events bring audits of other validators' verdicts (`audit_rate`)
and the committees this validator sits on, whose work it re-checks before voting. Each such check is a
`Submission` with a `Purpose` and goes through the daemon's fetch/check/retry machinery; the follow-ups that fall
due later (finalize, draw, reveal, resolve) wait in validator.court.CourtDuties. A court file is checked once by
this validator: a precheck's outcome answers its audit, or a stand-in's verdict (`prechecked`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import replace
from typing import Any, Callable

from ledger_client.chain.bindings import CaseVoided, CommitteeDrawn, Disputed, DisputeReopened, VerdictFinal, VerdictGiven
from ledger_client.chain import errors
from ledger_client.chain.errors import ContractRevert, TransactionFailed
from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import ZERO_ADDRESS, chain_time, submitted_event
from ledger_client.ipfs.content import put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import hex_text
from protocol.pool import CaseState
from protocol.verdicts import Reason
from validator.config import DaemonConfig
from validator.chains import AuditChain
from validator.court import DISPUTES_BONDED, Conduct, CourtDuties, CourtRules, audit_key, audits, vote_commitment
from validator.cursor_journal import CursorJournal
from validator.cursor_journal import prepare as prepare_cursor
from validator.keeper import Keeper
from validator.metrics import Metrics
from validator.outcome import CheckOutcome, Purpose, Submission, publish_evidence
from validator.retries import AT_THE_NEXT_POLL, RetryBook

log = logging.getLogger("proofswarm.validator")

MAX_PRECHECKED = 4096
"""Prechecked outcomes kept for verdicts still to come; beyond this the oldest go (they are checked again
if their verdict comes)."""
CONCUR_GAS = 400_000
"""Gas limit of a `concur`: above the ~220k of one that makes a challenge final (the worker slashed, the bounty
paid: forge's gas report of test_aChallengeEveryOtherValidatorConcursWithSlashesAtOnce); a transaction pays only
for the gas it uses."""
STAND_IN_SPREAD_S = 3
"""Stand-ins for a silent assigned validator spread their verdicts over this many seconds after the
assigned window (each at its own offset), so that most of the time only one sends one."""
RECORD_DRAW_AFTER_BLOCKS = 64
"""A stand-in records a silent assignee's draw (`drawAssignment`) this many blocks after the submission plus
its own offset of up to as many more: well inside the 256 blocks its block hash stays readable."""
RECORD_DRAW_CHECK_S = 10
"""While that draw is unrecorded, a stand-in looks again this often (seconds) before its turn."""
FOLLOW_UP_GRACE_S = 3
"""Seconds others leave the party that profits from a follow-up (the judge's finalize, the disputer's
draw and resolve) before doing it themselves."""
CHAIN_TIME_TTL_S = 0.25
"""How long the validator reuses the latest block's timestamp (`ChainClock.now`): a court's windows are seconds
long, and wall time, which `now` never falls behind, goes on meanwhile."""

VerdictSent = Callable[[Submission, str, str, str], None]
"""Records a verdict sent: (submission, "accepted" | "challenged", reason, message)."""


class ChainClock:
    """The chain's head and time as the validator's poll reads them."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self._time: tuple[float, int] | None = None  # (monotonic clock when read, the latest block's timestamp)
        self._head: int | None = None

    def read(self, latest: Any) -> None:
        """Take the head and its timestamp from the latest block (read once at a poll's start)."""
        self._time, self._head = (time.monotonic(), latest["timestamp"]), latest["number"]

    def forget(self) -> None:
        """Ask the chain again at the next `now` (its time was moved)."""
        self._time = None

    def now(self) -> int:
        """The timestamp the next block will have, about: devnets mine blocks only on transactions, so
        the latest block's timestamp lags wall time until someone sends one. The latest block is asked for
        at most every CHAIN_TIME_TTL_S (a poll asked for it several times per submission)."""
        now = time.monotonic()
        if self._time is None or now - self._time[0] > CHAIN_TIME_TTL_S:
            self._time = (now, chain_time(self.ledger))
        return max(self._time[1], int(time.time()))

    def block_time(self) -> int:
        """The latest block's timestamp as this poll read it (asked now outside a poll)."""
        return self._time[1] if self._time is not None else chain_time(self.ledger)

    def head(self) -> int:
        """The latest block's number as this poll read it (asked now outside a poll)."""
        return self._head if self._head is not None else self.ledger.w3.eth.block_number


class CourtFlow:
    """What a court pool asks of one validator: which checks it wants, and the verdicts, audits and votes sent."""

    def __init__(self, ledger: Ledger, court: Any, config: DaemonConfig, conduct: Conduct, metrics: Metrics,
                 retries: RetryBook, clock: ChainClock, kubo: KuboClient, verdict_sent: VerdictSent):
        self.ledger, self.court, self.config, self.conduct = ledger, court, config, conduct
        self.metrics, self.retries, self.clock, self.kubo, self.verdict_sent = metrics, retries, clock, kubo, verdict_sent
        self.rules = CourtRules.of(court.get_params(config.pool_id))
        self.duties = CourtDuties(config.state_dir / "court.json")
        self.audit_key = audit_key(ledger)
        self.chain = AuditChain.of(ledger, config.pool_id, spare=DISPUTES_BONDED * self.rules.dispute_bond)
        """This validator's committed hash chain when the pool has forced errors (its audits are drawn from it)."""
        self.keeper = None if self.chain is None else Keeper(self.chain, court, self.duties.book, self.duties.save,
                                                             ledger.address, stagger)
        """Settles the forced errors of the files it saw judged, charges lazy auditors, reports silent validators."""
        self.prechecked: dict[bytes, CheckOutcome] = {}
        """This validator's outcomes of files whose verdict it has not seen yet — prechecks, and judge checks
        another validator's verdict beat (`keep_for_audit`) — for the verdict's audit or a stand-in's verdict
        (memory only: after a restart the verdict's audit checks the file again)."""
        self._audits_ready: list[tuple[Submission, CheckOutcome]] = []
        # a case final or void needs no finalize: knowing it from the events saves a reverted estimate a file
        # (with early finality most verdicts are final at their last concurrence, or at once)
        ends = ["VerdictFinal", "CaseVoided"]
        cursor_path = config.state_dir / "court_cursor.json"
        prepare_cursor(cursor_path)
        self.cursor = EventCursor(court, ["VerdictGiven", "Disputed", "DisputeReopened", "CommitteeDrawn", *ends],
                                  cursor_path, confirmations=config.confirmations,
                                  start_block=ledger.deployment.block, added_events=ends,
                                  batch_blocks=ledger.logs.page_blocks, pool_id=config.pool_id)
        self.cursor_journal = CursorJournal(cursor_path, self.cursor.state)

    # ------------------------------------------------------------------ which checks

    def prechecks(self, subs: list[Submission]) -> list[Submission]:
        """Prechecks of the files to be judged that this validator audits (`audit_rate`)."""
        if not (self.conduct.judges and self.conduct.checks):
            return []
        return [replace(s, purpose=Purpose.PRECHECK) for s in subs if s.purpose is Purpose.JUDGE
                and self.audits(s.work_id, s.submitted_at)]

    def audits(self, work_id: bytes, submitted_at: int) -> bool:
        """Whether this validator audits the verdict on `work_id`: drawn by its hash chain where one covers the file's
        epoch (`ForcedErrors.isAudited`'s rule at the pool's `auditBps`), else by its key's HMAC at `audit_rate`."""
        if self.chain is not None:  # a precheck's file is of the epoch now (its case's time is not read for it)
            drawn = self.chain.audits(work_id, submitted_at or self.clock.now())
            if drawn is not None:
                return drawn
        return audits(self.audit_key, work_id, self.config.audit_rate)

    def without_audited_prechecks(self, subs: list[Submission]) -> list[Submission]:
        """A verdict seen with its precheck still to run: its audit checks the file, the precheck goes."""
        audited = {s.work_id for s in subs if s.purpose is Purpose.AUDIT}
        dropped = [s for s in subs if s.purpose is Purpose.PRECHECK and s.work_id in audited]
        for s in dropped:
            self.retries.drop(s.key)
        return [s for s in subs if s not in dropped]

    def wants(self, s: Submission) -> tuple[bool | None, int]:
        """Whether the submission should be checked now for `s.purpose` — True, False (never: judged, not ours,
        too late) or None (not yet: postponed in the retry book) — and its submission time."""
        case = self.court.cases(s.work_id)
        return self._case_wants(s, case), case.submitted_at

    def _case_wants(self, s: Submission, case: Any) -> bool | None:
        me, rules = self.ledger.address, self.rules
        state, submitted_at, submitted_block = case.state, case.submitted_at, case.submitted_block
        if s.purpose is Purpose.JUDGE:
            if state != CaseState.PENDING or not self.conduct.judges:
                return False
            now = self.clock.now()
            if now > submitted_at + rules.verdict_window:
                return False
            assigned = self._drawn(s, submitted_block)
            if assigned is None:
                return None
            if assigned not in (ZERO_ADDRESS, me):
                unrecorded = case.assigned == 0
                record_at = submitted_block + RECORD_DRAW_AFTER_BLOCKS + stagger(me, s.work_id, RECORD_DRAW_AFTER_BLOCKS)
                if unrecorded and self.clock.head() > record_at:
                    self._record_draw(s.work_id)  # the assignee is silent: keep its draw past the 256-block horizon
                    unrecorded = False
                opens = submitted_at + rules.assigned_window + 1
                if now < opens and not self._can_judge(assigned):
                    opens = submitted_at  # without a verdict's reservation it cannot judge: no window to wait out
                stand_in_at = opens + stagger(me, s.work_id, STAND_IN_SPREAD_S)
                if now < stand_in_at:  # the assigned validator's turn; then stand-ins, one after another
                    wait = stand_in_at - now
                    self.retries.postpone(s, min(wait, RECORD_DRAW_CHECK_S) if unrecorded else wait)
                    return None
            return True
        if s.purpose is Purpose.AUDIT:
            return state == CaseState.VERDICT and self.clock.now() <= case.verdict_at + rules.dispute_window
        if s.purpose is Purpose.PRECHECK:
            if state != CaseState.PENDING:  # judged already: the verdict's audit checks it
                return False
            assigned = self._drawn(s, submitted_block)
            if assigned is None:
                return None
            return assigned != me  # our own assignment is checked as its judge
        return (state == CaseState.DISPUTED and self.conduct.votes and s.work_id.hex() not in self.duties.book.votes
                and me in self.court.committee_of(s.work_id))

    def _drawn(self, s: Submission, submitted_block: int) -> str | None:
        """The case's assigned validator (ZERO_ADDRESS: nobody eligible), or None — postponed to the next poll — while
        the draw's block is not on the chain yet (`assignedValidator` is zero until block B + 2)."""
        assigned = self.court.assigned_validator(s.work_id)
        if assigned == ZERO_ADDRESS and self.clock.head() <= submitted_block + 1:
            self.retries.postpone(s, AT_THE_NEXT_POLL)
            return None
        return assigned

    def _can_judge(self, validator: str) -> bool:
        """Whether `validator`'s unreserved stake covers a verdict's reservation (ValidatorCourt: otherwise a
        stand-in may judge its cases at once)."""
        v = self.court.get_validator(self.config.pool_id, validator)
        return v.locked - v.reserved >= self.rules.wrong_verdict_slash

    def _record_draw(self, work_id: bytes) -> None:
        """Record a pending case's assignment (`drawAssignment`): its block hash is readable for 256 blocks
        only, and an unrecorded draw past them leaves the case with no assignee to answer for its silence."""
        try:
            self.court.draw_assignment(work_id)
        except (TransactionFailed, ContractRevert) as exc:  # recorded meanwhile, or judged: nothing to keep
            log.info("work 0x%s: draw not recorded by us: %s", work_id.hex(), exc)

    def window_end(self, s: Submission) -> int:
        """Chain time by which what this check is for must be sent: the verdict window (judge), the dispute window
        after the verdict (audit — a withheld file attested by an accomplice must be disputed before it is final)
        or the commit period (vote)."""
        if s.purpose is Purpose.AUDIT:
            return self.court.cases(s.work_id).verdict_at + self.rules.dispute_window
        if s.purpose is Purpose.VOTE:
            return self.court.disputes(s.work_id).disputed_at + self.rules.commit_period
        return s.submitted_at + self.rules.verdict_window

    # ------------------------------------------------------------------ one check per file

    def checked_once(self, queue: list[Submission]) -> tuple[list[Submission], list[tuple[Submission, CheckOutcome]]]:
        """A court file is checked once by this validator: a judge check (a stand-in's, once the assignee was slow)
        takes the outcome of the file's precheck, and a precheck queued beside its file's judge check is dropped
        (a judge that loses the race keeps its outcome for the audit: `send_verdict`). Returns the files left to
        check and the judge checks answered already."""
        judging = {s.work_id for s in queue if s.purpose is Purpose.JUDGE}
        left, checked = [], []
        for s in queue:
            if s.purpose is Purpose.JUDGE and s.work_id in self.prechecked:
                checked.append((s, self.prechecked.pop(s.work_id)))
            elif s.purpose is Purpose.PRECHECK and s.work_id in judging:
                self.retries.drop(s.key)
                self.metrics.backlog.dec()
            else:
                left.append(s)
        return left, checked

    def keep_for_audit(self, work_id: bytes, outcome: CheckOutcome) -> None:
        """An outcome whose verdict is not ours to send (prechecked, or another judge was first): the verdict's
        audit uses it instead of checking the file again."""
        self.prechecked[work_id] = outcome
        while len(self.prechecked) > MAX_PRECHECKED:  # verdicts never seen (judged while we were away)
            self.prechecked.pop(next(iter(self.prechecked)))

    # ------------------------------------------------------------------ acting on outcomes

    def conclude(self, s: Submission, outcome: CheckOutcome) -> int:
        """Act on a check's outcome as its purpose says; returns 1 if a first verdict was sent."""
        if s.purpose is Purpose.AUDIT:
            self.dispute_or_concur(s, outcome)
            return 0
        if s.purpose is Purpose.VOTE:
            self.decide_vote(s, outcome)
            return 0
        return self.send_verdict(s, outcome)

    def send_verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        """The first verdict, sent to the court (final only after the dispute window: then `finalize`); returns 1
        if it was sent."""
        checked, ok = outcome, self.conduct.verdict(outcome.ok)
        try:
            if ok:
                self.court.attest(s.work_id)
                verdict, reason = "accepted", "ok"
            else:
                if outcome.ok:  # a dishonest conduct challenges work that passed: it makes up a reason
                    outcome = CheckOutcome(False, Reason.TOPLOC, f"{self.conduct.name}: challenged without cause")
                evidence = publish_evidence(self.kubo, s, outcome, self.ledger.address)
                self.court.challenge(s.work_id, int(outcome.reason), evidence)
                verdict, reason = "challenged", outcome.reason.name
        except TransactionFailed:  # another validator's verdict was mined first (stand-ins race)
            if self.court.cases(s.work_id).state != CaseState.PENDING:
                self.keep_for_audit(s.work_id, checked)
                self.metrics.skipped.inc()
                self.retries.drop(s.key)
                return 0
            raise
        except ContractRevert as exc:
            if isinstance(exc, (errors.NotAssigned, errors.AssignmentNotDrawn)):
                self.retries.postpone(s, max(self.config.poll_interval_s, 1.0))
                return 0
            if isinstance(exc, errors.InsufficientBond):  # every locked unit backs an open verdict: wait for one
                log.warning("work 0x%s: %s (lock more with a larger bond); trying again", s.work_id.hex(), exc)
                self.retries.postpone(s, max(self.config.poll_interval_s, 2.0))
                return 0
            if isinstance(exc, (errors.WrongCaseState, errors.OutsidePeriod, errors.SubmissionNotPending,
                                errors.NotEligible)):
                log.info("work 0x%s: no verdict from us: %s", s.work_id.hex(), exc)
                if isinstance(exc, errors.WrongCaseState):  # judged by another validator meanwhile
                    self.keep_for_audit(s.work_id, checked)
                if isinstance(exc, errors.NotEligible):  # not in the case's set: if nobody judges, void the case then
                    self.finalize_when_lapsed(s.work_id)
                self.metrics.skipped.inc()
                self.retries.drop(s.key)
                return 0
            raise
        self.duties.book.finalize[s.work_id.hex()] = self.clock.now() + self.rules.dispute_window + 1
        self.duties.count("verdicts")
        self.verdict_sent(s, verdict, reason, outcome.message)
        return 1

    def finalize_when_lapsed(self, work_id: bytes) -> None:
        """Void the case once its verdict window has passed if nobody judged it (`finalize`: the work then expires,
        neither paid nor slashed)."""
        lapses = self.court.cases(work_id).submitted_at + self.rules.verdict_window + 1
        self.duties.book.finalize.setdefault(work_id.hex(), lapses)

    def dispute_or_concur(self, s: Submission, outcome: CheckOutcome) -> None:
        """Dispute another validator's verdict that this check contradicts; concur with one it confirms (once
        every validator that may dispute has concurred, the verdict is final without waiting for the window)."""
        self.retries.drop(s.key)
        case = self.court.cases(s.work_id)
        if case.state != CaseState.VERDICT:
            return
        if outcome.ok == case.accepted:
            self._follow_up("concurred", s.work_id.hex(), self._concur, s.work_id)
            return
        digest = publish_evidence(self.kubo, s, outcome, self.ledger.address) if not outcome.ok else put_object(
            self.kubo, json.dumps({"work_id": hex_text(s.work_id), "validator": self.ledger.address,
                                   "finding": "every check passed"}).encode())
        try:
            receipt = self.court.dispute(s.work_id, digest)
        except TransactionFailed:  # another auditor's dispute was mined first
            if self.court.cases(s.work_id).state != CaseState.VERDICT:
                return
            raise
        except ContractRevert as exc:
            if isinstance(exc, (errors.WrongCaseState, errors.OutsidePeriod, errors.NotEligible,
                                errors.NotRegistered)):
                return
            raise
        key = s.work_id.hex()
        self.duties.book.draw[key] = receipt["blockNumber"]
        self.duties.book.resolve[key] = self.clock.now() + self.rules.commit_period + self.rules.reveal_period + 1
        self.duties.count("disputes")
        log.info("work 0x%s: disputed the verdict (%s)", key, "valid" if outcome.ok else outcome.reason.name)

    def _concur(self, work_id: bytes) -> None:
        """`concur`, with the gas of the last concurrence (which makes the verdict final) whoever is last: the
        other validators concur at about the same time, and an estimate taken before theirs is mined is short."""
        self.court.sender.send(self.court.function("concur", work_id), function="concur", min_gas=CONCUR_GAS)

    def decide_vote(self, s: Submission, outcome: CheckOutcome) -> None:
        """Decide and commit this committee member's vote (salt saved first, revealed later)."""
        self.retries.drop(s.key)
        key = s.work_id.hex()
        if key in self.duties.book.votes:
            return
        disputed_at = self.court.disputes(s.work_id).disputed_at
        vote = self.duties.new_vote(s.work_id, self.conduct.vote(outcome.ok),
                                    reveal_after=disputed_at + self.rules.commit_period,
                                    resolve_after=disputed_at + self.rules.commit_period + self.rules.reveal_period + 1)
        self._commit_vote(s.work_id, vote)

    def _commit_vote(self, work_id: bytes, vote) -> None:
        commitment = vote_commitment(work_id, self.ledger.address, vote.valid, bytes.fromhex(vote.salt))
        if bytes(self.court.votes(work_id, self.ledger.address)) != commitment:
            self.court.commit_vote(work_id, commitment)
        vote.committed = True
        self.duties.count("votes")
        self.duties.save()

    # ------------------------------------------------------------------ the court's events and follow-ups

    def poll_events(self, latest: Any) -> list[Submission]:
        """Audits and committee seats from the court's events; every verdict and dispute also becomes a
        follow-up (finalize, draw, resolve) that anyone may do once it falls due. The cursor reads this pool's
        events only (each names the pool as its first indexed topic)."""
        me, rules, out = self.ledger.address, self.rules, []
        for e in self.cursor.poll(latest):
            if isinstance(e, Removed):
                continue
            key = bytes(e.work_id).hex()
            if isinstance(e, VerdictGiven):
                # the judge is paid to finalize: the others follow up only if it does not
                grace = 0 if e.judge == me else FOLLOW_UP_GRACE_S + stagger(me, bytes(e.work_id), FOLLOW_UP_GRACE_S)
                self.duties.book.finalize.setdefault(key, self.clock.now() + rules.dispute_window + 1 + grace)
                submitted_at = self._submitted_at(e)
                if self.keeper is not None:
                    self.keeper.saw_verdict(bytes(e.work_id), submitted_at, e.judge, e.accepted)
                if e.judge != me and self.conduct.judges and self.audits(bytes(e.work_id), submitted_at):
                    prechecked = self.prechecked.pop(bytes(e.work_id), None)
                    if not self.conduct.checks:  # a rubber stamp concurs unchecked
                        prechecked = CheckOutcome(e.accepted, message="not checked")
                    audit = self._submission_of(bytes(e.work_id), Purpose.AUDIT)
                    if prechecked is None:
                        out += audit
                    else:
                        log.debug("work 0x%s: audited by its precheck", key)
                        self._audits_ready += [(a, prechecked) for a in audit]
            elif isinstance(e, (Disputed, DisputeReopened)):
                self.duties.book.finalize.pop(key, None)
                if isinstance(e, Disputed) and self.keeper is not None:
                    self.keeper.saw_dispute(bytes(e.work_id), e.disputer)
                self.duties.book.votes.pop(key, None)  # a reopened dispute: the last committee's seat is gone
                # the disputer draws and resolves first; the others only if it does not
                first = isinstance(e, Disputed) and e.disputer == me
                later = 0 if first else FOLLOW_UP_GRACE_S + stagger(me, bytes(e.work_id), FOLLOW_UP_GRACE_S)
                self.duties.book.draw.setdefault(key, e.meta.block_number + (0 if first else 2))
                self.duties.book.resolve.setdefault(key, self.clock.now() + rules.commit_period + rules.reveal_period
                                                    + 1 + later)
            elif isinstance(e, CommitteeDrawn) and me in e.committee and self.conduct.votes:
                out += self._submission_of(bytes(e.work_id), Purpose.VOTE)
            elif isinstance(e, (VerdictFinal, CaseVoided)):
                self.duties.book.finalize.pop(key, None)
                if isinstance(e, CaseVoided) and self.keeper is not None:
                    self.keeper.saw_void(bytes(e.work_id))
        return out

    def _submitted_at(self, e: VerdictGiven) -> int:
        """The case's submission time, asked only in a pool with forced errors (its epoch decides the audit draw
        and when the keeper settles the file)."""
        return self.court.cases(bytes(e.work_id)).submitted_at if self.chain is not None else 0

    def _submission_of(self, work_id: bytes, purpose: Purpose) -> list[Submission]:
        event = submitted_event(self.ledger, work_id)
        return [] if event is None else [Submission.of_log(event, purpose)]

    def finish_poll(self) -> None:
        """The poll's end: audits answered by prechecks, then every follow-up that is due; the duties saved."""
        while self._audits_ready:
            self.dispute_or_concur(*self._audits_ready.pop(0))
        self.run_duties()
        self.duties.save()
        if self.chain is not None:
            self.chain.tick(self.clock.now())
            self.keep()
            self.duties.save()

    def keep(self) -> None:
        """The keeper's step (validator.keeper), on the latest block's time: a call the contract checks against its
        block's time is sent only once a block past the window exists."""
        try:
            sent = self.keeper.step(self.clock.block_time())
        except Exception as exc:  # noqa: BLE001 - chain down: what is due stays booked for the next poll
            log.error("keeper: %s: %s", exc.__class__.__name__, exc)
            return
        for what, n in sent.items():
            for _ in range(n):
                self.duties.count(what)

    def run_duties(self) -> None:
        """Do every court follow-up that is due; one that fails stays for the next poll."""
        book, now, block = self.duties.book, self.clock.now(), self.clock.head()
        for key, due in list(book.finalize.items()):
            if now >= due and self._follow_up("finalize", key, self.court.finalize, bytes.fromhex(key)):
                book.finalize.pop(key)
        for key, dispute_block in list(book.draw.items()):
            if block > dispute_block + 1 and self._follow_up("drawn", key, self.court.draw_committee,
                                                              bytes.fromhex(key)):
                book.draw.pop(key)
                dispute = self.court.disputes(bytes.fromhex(key))
                if not dispute.drawn and dispute.dispute_block > dispute_block:
                    # past the block-hash horizon the court anchored the draw to a later block: draw again then
                    book.draw[key] = dispute.dispute_block
        for key, vote in list(book.votes.items()):
            if not vote.committed:
                if self._follow_up("committed", key, self._commit_vote, bytes.fromhex(key), vote) and not vote.committed:
                    book.votes.pop(key)  # the commit period ended before the vote could be committed
            elif now > vote.reveal_after and self._follow_up("revealed", key, self.court.reveal_vote,
                                                              bytes.fromhex(key), vote.valid, bytes.fromhex(vote.salt)):
                book.resolve.setdefault(key, vote.resolve_after)
                book.votes.pop(key)
        for key, due in list(book.resolve.items()):
            if now >= due and self._follow_up("resolved", key, self.court.resolve, bytes.fromhex(key)):
                book.resolve.pop(key)

    def _follow_up(self, what: str, key: str, call, *args) -> bool:
        """Run one follow-up; True when it is done (or can never be done: the case moved on without it)."""
        try:
            call(*args)
        except TransactionFailed:  # another validator's follow-up was mined first; the next poll re-checks
            log.info("work 0x%s: %s lost a race; checking again next poll", key, what)
            return False
        except ContractRevert as exc:
            if isinstance(exc, errors.OutsidePeriod) and what != "drawn":
                return what in ("committed", "revealed") and exc.args_dict.get("until", 0) < self.clock.now()
            if isinstance(exc, (errors.WrongCaseState, errors.OutsidePeriod, errors.NotCommitteeMember,
                                errors.RevealMismatch, errors.AlreadyCommitted, errors.AlreadyConcurred,
                                errors.NotEligible, errors.NotRegistered)):
                return True
            log.error("work 0x%s: %s failed: %s", key, what, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - chain down: the follow-up waits for the next poll
            log.error("work 0x%s: %s failed: %s: %s", key, what, exc.__class__.__name__, exc)
            return False
        if what in ("finalize", "resolved", "concurred"):
            self.duties.count({"finalize": "finalized"}.get(what, what))
        log.info("work 0x%s: %s", key, what)
        return True


def stagger(validator: str, work_id: bytes, spread_s: int) -> int:
    """This validator's own offset in [0, spread_s) for a work: a fixed function of both."""
    return int.from_bytes(hashlib.sha256(validator.lower().encode() + work_id).digest()[:4], "big") % max(spread_s, 1)
