"""The challenge daemon: judge every submission of a pool exactly once.

Loop: the persistent event cursor yields `WorkSubmitted` events (work id, worker, step, nonce,
rollout digest); submissions of our pool still Pending on-chain are fetched from IPFS by digest
(in threads, with a timeout), checked in checker processes (validator.checker_pool: one check
per process, each with its own deadline), and judged on-chain: `attest`, or `challenge` with the digest of an evidence document added to IPFS.

Hostile bytes never stop the loop. Whatever goes wrong with one submission stays with it: a
file that cannot be fetched is tried again with backoff (`fetch_attempts` in all, spread over
time) before it is challenged UNAVAILABLE; a check that crashes its process or overruns
`check_timeout_s` is retried in a fresh process and, after `max_checker_failures` such
failures, challenged UNCHECKABLE; a file whose step's policy exact mode cannot run (the trainer's
fault, not the worker's) gets no verdict at all and expires unjudged; a check that raised an infrastructure error, or a verdict
that could not be sent, is retried until the challenge window closes. Those submissions wait
in a retry book (validator.retries) that is saved before the cursor is committed, so after a
kill -9 nothing is lost; the on-chain status (re-read right before each verdict) makes every
redelivery harmless: every submission gets exactly one verdict.

Spot checks (protocol.spotcheck): when the pool's `spotCheckBps` is below 10000 a submission is
checked only once block B + 1 (B = its `WorkSubmitted` block) has `confirmations` blocks on top:
its hash seeds which completions get the expensive checks. Until then the submission waits in the
retry book (postponed, not counted as a failure).

Court pools (the pool's judge is the ValidatorCourt): validator.court_flow.CourtFlow says which checks the
court wants (first verdicts when assigned or standing in, audits, committee votes, prechecks) and acts on their
outcomes; each such check is a `Submission` with a `Purpose` and goes through the same fetch/check/retry machinery.
The types are in validator.outcome, the metrics in validator.metrics, the configuration in validator.config.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable

from ledger_client.chain import errors
from ledger_client.chain.batches import batches_of
from ledger_client.chain.errors import ContractRevert
from ledger_client.chain.events import BLOCK_POLL_S, EventCursor, Removed, latest_block
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import chain_time, court_of, get_work, pool_state, spot_check_block
from ledger_client.ipfs.content import ContentError, ContentUnavailable, get_object
from ledger_client.ipfs.kubo import KuboClient
from proofs.margins import MarginNull
from protocol.digest import hex_text
from protocol.pool import WorkStatus
from protocol.spotcheck import MAX_BPS
from protocol.verdicts import Reason
from validator.batch_flow import BatchFlow
from validator.checker_pool import CheckerPool, CheckFailure
from validator.config import DaemonConfig
from validator.court import Conduct
from validator.court_flow import ChainClock, CourtFlow
from validator.cursor_journal import CursorJournal
from validator.cursor_journal import prepare as prepare_cursor
from validator.metrics import Metrics
from validator.outcome import Checker, CheckOutcome, Purpose, Submission, VerdictJournal, publish_evidence
from validator.retries import AT_THE_NEXT_POLL, RetryBook
from validator.state_folder import FolderOwner, StateFolder
from validator.worker_margins import NullUse, WorkerMargins, book_path

log = logging.getLogger("proofswarm.validator")


class ValidatorDaemon:
    """Judges the submissions of one pool; `run()` until `stop` is set, or `run_once()` per poll."""

    def __init__(self, ledger: Ledger, config: DaemonConfig, checker_factory: Callable[[], Checker],
                 metrics: Metrics | None = None, conduct: Conduct | None = None):
        self.ledger = ledger
        self.config = config
        self.conduct = conduct or Conduct()
        self.metrics = metrics or Metrics()
        self.state_folder = StateFolder.claim(config.state_dir, FolderOwner(
            ledger.deployment.chain_id, ledger.deployment.compute_pool.lower(), config.pool_id))
        self.kubo = KuboClient(config.kubo_api)
        cursor_path = config.state_dir / "cursor.json"
        prepare_cursor(cursor_path)  # its changes since the last snapshot folded in
        self.cursor = EventCursor(ledger.pool, ["WorkSubmitted"], cursor_path,
                                  confirmations=config.confirmations, start_block=ledger.deployment.block,
                                  batch_blocks=ledger.logs.page_blocks, pool_id=config.pool_id)
        self.cursor_journal = CursorJournal(cursor_path, self.cursor.state)
        self.journal = VerdictJournal(config.state_dir / "verdicts.jsonl")
        self.retries = RetryBook(config.state_dir / "retries.json")
        self.pool = pool_state(ledger, config.pool_id)
        self.worker_margins = WorkerMargins(book_path(config.state_dir, config.pool_id))
        self.null_use = NullUse()
        self._null_use_warned = False
        self.checkers = CheckerPool(checker_factory, processes=config.processes,
                                    check_timeout_s=config.check_timeout_s)
        self._fetchers = ThreadPoolExecutor(max_workers=max(2, config.max_in_flight))
        self.chain_clock = ChainClock(ledger)
        court = court_of(ledger, config.pool_id)
        self.court_flow = None if court is None else CourtFlow(
            ledger, court, config, self.conduct, self.metrics, self.retries, self.chain_clock, self.kubo,
            self._verdict_sent)
        """None for a permissioned pool (validators listed by the pool; verdicts to the pool)."""
        wb = batches_of(ledger, config.pool_id) if court is None else None
        self.batch_flow = None if wb is None else BatchFlow(ledger, wb, config, self.pool, self.kubo)
        """The pool's batched leaves when its files settle in WorkBatches (validator.batch_flow)."""

    def close(self) -> None:
        self.cursor_journal.close()
        if self.court_flow is not None:
            self.court_flow.cursor_journal.close()
        if self.batch_flow is not None:
            self.batch_flow.close()
        self.checkers.close()
        self._fetchers.shutdown(cancel_futures=True)
        self.kubo.close()
        self.state_folder.release()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                judged = self.run_once()
            except Exception as exc:  # noqa: BLE001 - chain or IPFS down: log, wait, poll again
                log.error("poll failed: %s: %s", exc.__class__.__name__, exc)
                self.metrics.loop_errors.inc()
                self.forget_failed_poll()
                judged = 0
                stop.wait(max(self.config.poll_interval_s, 2.0))
            if judged == 0:  # the next poll at the next block (new work comes with one), or when a retry is due
                self._wait_for_work(self.chain_clock.head(), stop)

    def _wait_for_work(self, seen: int, stop: threading.Event) -> None:
        """Return once the head is past `seen`, or once a retry is due and `poll_interval_s` has passed, or on
        `stop`. An idle daemon asks only for the head's number, after BLOCK_POLL_S and then at doubling waits up
        to `head_every_s`; events, blocks and the pool's state are read by the poll this wait lets through. A
        failed read returns after the error wait: the next poll reports a chain that is down."""
        every, since = BLOCK_POLL_S, time.monotonic()
        while not stop.wait(every):
            if self.retries.next_at() <= time.time() and time.monotonic() - since >= self.config.poll_interval_s:
                return
            try:
                if self.ledger.w3.eth.block_number != seen:
                    return
            except Exception:  # noqa: BLE001 - see the docstring
                stop.wait(max(self.config.poll_interval_s, 2.0))
                return
            every = min(2 * every, self.config.head_every_s)

    def forget_failed_poll(self) -> None:
        """Put the cursors back where they were last committed: a poll that failed part-way had moved them past
        events it never judged (a later page refused, a block or a file that could not be read), which the next
        poll would otherwise skip for good. The events come again, as after a kill -9, and the work already judged
        on-chain is skipped."""
        self.cursor.state = self.cursor_journal.saved()
        if self.court_flow is not None:
            self.court_flow.cursor.state = self.court_flow.cursor_journal.saved()
        if self.batch_flow is not None:
            self.batch_flow.forget_failed_poll()

    def run_once(self) -> int:
        """One poll: judge every new submission and every retry that is due, save what is left for
        later, then commit the cursor. Returns how many verdicts were sent."""
        latest = latest_block(self.ledger.w3)  # one read for both cursors, the chain's clock and the spot checks
        self.chain_clock.read(latest)
        flow = self.court_flow
        events = [e for e in self.cursor.poll(latest)
                  if not isinstance(e, Removed) and e.pool_id == self.config.pool_id]
        subs = [Submission.of_event(e) for e in events]
        if flow is not None:
            subs += flow.poll_events(latest)
            subs += flow.prechecks(subs)
        if self.batch_flow is not None:
            subs += self.batch_flow.poll(latest, self.chain_clock.now())
        seen = {s.key for s in subs}
        subs += [s for s in self.retries.due() if s.key not in seen]
        if flow is not None:
            subs = flow.without_audited_prechecks(subs)
        judged = self._judge_all(subs)
        if flow is not None:
            flow.finish_poll()
        self.retries.save()
        if self.batch_flow is not None:
            self.batch_flow.finish_poll(self.chain_clock.now())
        self.metrics.retry_queue.set(len(self.retries.entries))
        self.cursor_journal.commit(self.cursor.state)  # what changed, appended (validator/cursor_journal.py)
        if flow is not None:
            flow.cursor_journal.commit(flow.cursor.state)
        if self.batch_flow is not None:
            self.batch_flow.commit()
        return judged

    # ------------------------------------------------------------------ judging

    def _judge_all(self, subs: list[Submission]) -> int:
        todo, prechecked = [], []
        for s in subs:
            try:
                if s.batch_id is not None:
                    wanted, submitted_at = self.batch_flow.wants(s)
                elif self.court_flow is None:
                    work = get_work(self.ledger, s.work_id)
                    wanted, submitted_at = work.status == WorkStatus.PENDING, work.submitted_at
                else:  # the court's case says all: the pool's work stays pending until the court ends it
                    wanted, submitted_at = self.court_flow.wants(s)
            except Exception as exc:  # noqa: BLE001 - our chain connection: try again later
                self._defer(s, "errors", f"{exc.__class__.__name__}: {exc}")
                continue
            if wanted is None:  # waits for its turn (court: the assigned window)
                continue
            if not wanted:
                log.debug("work 0x%s: %s not wanted", s.work_id.hex(), s.purpose)
                self.metrics.skipped.inc()
                self.retries.drop(s.key)
                continue
            s = replace(s, submitted_at=submitted_at)
            if s.batch_id is not None:
                try:
                    early = self.batch_flow.precheck(s)
                except Exception as exc:  # noqa: BLE001 - our chain connection: try again later
                    self._defer(s, "errors", f"{exc.__class__.__name__}: {exc}")
                    continue
                if early is not None:  # settled without a fetch
                    prechecked.append((s, early))
                    continue
            if self.pool.spot_check_bps < MAX_BPS:
                try:
                    seed = spot_check_block(self.ledger, s.work_id, self.config.confirmations, s.block_number,
                                            s.block_hash, self.chain_clock.head())
                except Exception as exc:  # noqa: BLE001 - our chain connection: try again later
                    self._defer(s, "errors", f"{exc.__class__.__name__}: {exc}")
                    continue
                if seed is None:  # block B + 1 is not there yet: the randomness does not exist
                    self.retries.postpone(s, AT_THE_NEXT_POLL)
                    self.metrics.waiting.inc()
                    continue
                s = replace(s, spot_block=seed[0], spot_block_hash=seed[1])
            todo.append(s)
        self.metrics.backlog.set(len(todo) + len(prechecked))
        # the tightest deadlines first (Purpose.check_order); oldest submission first within each
        queue = sorted(todo, key=lambda s: (s.purpose.check_order, s.submitted_at))
        settled: list[tuple[Submission, CheckOutcome | CheckFailure]] = list(prechecked)
        judged = 0
        if self.court_flow is not None:
            queue, checked = self.court_flow.checked_once(queue)
            judged += sum(self._settle(s, outcome, fresh=False) for s, outcome in checked)
        if not self.conduct.checks:  # a rubber stamp answers from its conduct alone
            settled += [(s, CheckOutcome(True, message="not checked")) for s in queue]
            queue = []
        else:
            for s in queue[self.config.max_checks_per_poll:]:
                self.retries.postpone(s, 0.0)
            queue = queue[: self.config.max_checks_per_poll]
        fetches = {s.key: self._fetchers.submit(self._fetch, s) for s in queue}

        def fill() -> None:
            """Hand queued files to free checkers (files that need no check are settled later)."""
            while queue and self.checkers.free() and self.checkers.busy() < self.config.max_in_flight:
                s = queue.pop(0)
                fetched = fetches[s.key].result()
                if isinstance(fetched, bytes):
                    failure = self.checkers.submit(s.key, s, fetched)
                    if failure is not None:
                        settled.append((s, failure))
                else:
                    settled.append((s, fetched))

        while queue or self.checkers.busy() or settled:
            fill()
            for key, result in self.checkers.wait():
                settled.append((next(t for t in todo if t.key == key), result))
            fill()  # the checkers work on the next files while these verdicts are sent
            while settled:
                judged += self._settle(*settled.pop(0))
        return judged

    def _fetch(self, s: Submission) -> bytes | CheckOutcome | CheckFailure:
        try:
            return get_object(self.kubo, s.rollout_digest, timeout=self.config.fetch_timeout_s)
        except ContentUnavailable as exc:
            return CheckFailure("unfetchable", str(exc))
        except ContentError as exc:
            return CheckOutcome(False, Reason.DIGEST_MISMATCH, str(exc))
        except Exception as exc:  # noqa: BLE001 - our IPFS node: try again later
            return CheckFailure("error", f"{exc.__class__.__name__}: {exc}", infrastructure=True)

    def _settle(self, s: Submission, result: CheckOutcome | CheckFailure, fresh: bool = True) -> int:
        """Turn one submission's result into a verdict or a retry; never raises. `fresh`: the result of a check
        just run (not one kept from an earlier check), counted in the check metrics."""
        self.metrics.backlog.dec()
        if s.purpose is Purpose.PRECHECK:  # kept for the verdict; a file that failed to fetch or check is audited after it
            self.retries.drop(s.key)
            if isinstance(result, CheckOutcome):
                self._observe(result)
                self.court_flow.keep_for_audit(s.work_id, result)
            return 0
        try:
            if isinstance(result, CheckFailure):
                return self._failed(s, result)
            if fresh:
                self._observe(result)
            return self._conclude(s, result)
        except Exception as exc:  # noqa: BLE001 - sending the verdict failed: keep it for the next poll
            log.error("work 0x%s: verdict not sent: %s: %s", s.work_id.hex(), exc.__class__.__name__, exc)
            self._defer(s, "errors", f"verdict not sent: {exc.__class__.__name__}: {exc}")
            return 0

    def _observe(self, outcome: CheckOutcome) -> None:
        self.metrics.latency.observe(outcome.seconds)
        if outcome.tokens:
            self.metrics.tokens.inc(outcome.tokens)
            self.metrics.tokens_per_s.set(outcome.tokens / max(outcome.seconds, 1e-9))

    def _failed(self, s: Submission, failure: CheckFailure) -> int:
        """A fetch or check without an outcome: retry, or challenge once the file has had its chances."""
        key = s.key
        if failure.kind == "unfetchable":
            entry = self.retries.record(s, "fetch", failure.message, self.config.retry_backoff_s)
            if entry.fetch >= self.config.fetch_attempts or not self._time_for_retry(s, entry.next_at):
                return self._challenge_after_retries(
                    s, Reason.UNAVAILABLE, f"not available on {entry.fetch} fetch attempts: {failure.message}", entry)
            self.metrics.retries.labels("fetch").inc()
            return 0
        self.metrics.check_failures.labels(failure.kind).inc()
        if failure.kind in ("crash", "timeout"):
            self.metrics.checker_restarts.inc()
        if failure.kind in ("crash", "timeout") or (failure.kind == "error" and not failure.infrastructure):
            log.error("work 0x%s: checker %s: %s", key, failure.kind, failure.message)
            if failure.trace:
                log.debug("%s", failure.trace)
            entry = self.retries.record(s, "checker", f"{failure.kind}: {failure.message}", backoff_s=0.0)
            if entry.checker >= self.config.max_checker_failures:
                return self._challenge_after_retries(
                    s, Reason.UNCHECKABLE, f"the file made the checker fail {entry.checker} times "
                                           f"(last: {failure.kind}: {failure.message})", entry)
            self.metrics.retries.labels("checker").inc()
            return 0
        self.metrics.errors.inc()
        self._defer(s, "errors", failure.message)
        return 0

    def _challenge_after_retries(self, s: Submission, reason: Reason, message: str, entry) -> int:
        outcome = CheckOutcome(False, reason, message, statistics={"attempts": entry.history})
        sent = self._conclude(s, outcome)
        self.retries.drop(s.key)
        return sent

    def _time_for_retry(self, s: Submission, next_at: float) -> bool:
        """Whether a retry at `next_at` (local time) still leaves room for a verdict in the window."""
        window_end = self._window_end(s)
        retry_chain_time = chain_time(self.ledger) + max(0.0, next_at - time.time()) + self.config.fetch_timeout_s
        return retry_chain_time + self.config.verdict_margin_s < window_end

    def _window_end(self, s: Submission) -> int:
        """Chain time by which what this check is for must be sent: a permissioned pool's challenge window (after the
        submission, or a batched leaf's posting); in a court pool the verdict window (judge), the dispute window after
        the verdict (audit — a withheld file attested by an accomplice must be disputed before it is final) or the
        commit period (vote)."""
        if self.court_flow is None:
            return s.submitted_at + self.pool.challenge_window_s
        return self.court_flow.window_end(s)

    def _defer(self, s: Submission, kind: str, message: str) -> None:
        self.retries.record(s, kind, message, self.config.retry_backoff_s)
        self.metrics.retries.labels(kind).inc()

    def _conclude(self, s: Submission, outcome: CheckOutcome) -> int:
        """Act on a check's outcome as its purpose says; returns 1 if a verdict was sent."""
        if outcome.no_verdict:
            return self._no_verdict(s, outcome)
        if outcome.ok and outcome.margins:
            self._watch_null(outcome.margins)
        if s.batch_id is not None:
            return self._leaf_verdict(s, outcome)
        if self.court_flow is not None:
            return self.court_flow.conclude(s, outcome)
        return self._verdict(s, outcome)

    def _no_verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        """A file nobody can judge through no fault of its worker (its step's policy is one exact mode cannot run):
        no verdict, no dispute, no vote and no retry, one line logged. The work expires unjudged after the window
        (neither paid nor slashed); in a court pool its case lapses and is voided (`finalize`, booked here)."""
        log.warning("work 0x%s (%s, step %d): no verdict: %s", s.work_id.hex(), s.purpose.value, s.step,
                    outcome.message)
        self.metrics.skipped.inc()
        self.retries.drop(s.key)
        if self.court_flow is not None and s.purpose is Purpose.JUDGE:
            self.court_flow.finalize_when_lapsed(s.work_id)
        return 0

    def _verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        """Send the verdict unless the submission was judged meanwhile; returns 1 if one was sent."""
        work = get_work(self.ledger, s.work_id)
        if work.status != WorkStatus.PENDING:
            self.metrics.skipped.inc()
            self.retries.drop(s.work_id.hex())
            return 0
        if chain_time(self.ledger) > work.submitted_at + self.pool.challenge_window_s:
            log.warning("work 0x%s: challenge window closed before a verdict", s.work_id.hex())
            self.metrics.skipped.inc()
            self.retries.drop(s.work_id.hex())
            return 0
        outcome = self._accumulated(s, outcome)
        try:
            if outcome.ok:
                self.ledger.pool.attest(s.work_id)
                verdict, reason = "accepted", "ok"
            else:
                self.ledger.pool.challenge(s.work_id, int(outcome.reason),
                                          publish_evidence(self.kubo, s, outcome, self.ledger.address))
                verdict, reason = "challenged", outcome.reason.name
        except ContractRevert as exc:
            if isinstance(exc, (errors.AlreadyJudged, errors.ChallengeWindowClosed)):
                self.metrics.skipped.inc()
                self.retries.drop(s.work_id.hex())
                return 0
            raise
        self._verdict_sent(s, verdict, reason, outcome.message)
        return 1

    def _leaf_verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        """A batched leaf's verdict (validator.batch_flow): nothing sent for a good one, a challenge with its proofs
        for a bad one; 1 if a challenge was sent."""
        outcome = self._accumulated(s, outcome)
        verdict = self.batch_flow.verdict(s, outcome)
        if verdict is None:
            self.metrics.skipped.inc()
            self.retries.drop(s.key)
            return 0
        self._verdict_sent(s, verdict, "ok" if outcome.ok else outcome.reason.name, outcome.message)
        return verdict == "challenged"

    def _watch_null(self, margins: dict[str, Any]) -> None:
        """Track how much of the margin null the accepted files use (NullUse); say so once when it is outgrown."""
        use = self.null_use.add(margins["tokens"], margins["score"], MarginNull(**margins["null"]))
        self.metrics.margin_null_use.set(use)
        if use > 1 and len(self.null_use.files) >= NULL_USE_WARN_AFTER and not self._null_use_warned:
            self._null_use_warned = True
            log.warning("pool %d: the last %d accepted files use %.2fx the margin null's allowance: the policy has "
                        "outgrown its calibration, and honest workers will be challenged; recalibrate on the newest "
                        "policy (validator calibrate --pool %d --out F, trainer start --policy-verification F)",
                        self.config.pool_id, len(self.null_use.files), use, self.config.pool_id)

    def _accumulated(self, s: Submission, outcome: CheckOutcome) -> CheckOutcome:
        """An accepted file counted into its worker's margin book (validator.worker_margins): the outcome, or an
        accumulated SAMPLING challenge when the worker's e-value crossed. Permissioned pools only: a court's
        committee re-checks the one file, not the worker's record."""
        if not outcome.ok or not outcome.margins:
            return outcome
        m = outcome.margins
        evidence = self.worker_margins.judge(s.worker, hex_text(s.work_id), m["prompt_tokens"], m["score"],
                                             MarginNull(**m["null"]), m["worker_false_positive_rate"])
        if evidence is None:
            return outcome
        return replace(outcome, ok=False, reason=Reason.SAMPLING, statistics={"worker_margins": evidence},
                       thresholds={"margin_null": m["null"]},
                       message=f"the worker's margins over {evidence['files']} files ({evidence['score']:.3f} over "
                               f"{evidence['tokens']} tokens) are off the honest distribution: e-value "
                               f"e^{evidence['log_e_value']:.1f} >= 1/{evidence['worker_false_positive_rate']:g}")

    def _verdict_sent(self, s: Submission, verdict: str, reason: str, message: str) -> None:
        self.retries.drop(s.key)
        self.metrics.verdicts.labels(verdict, reason).inc()
        self.journal.write(s, verdict, reason, message)


NULL_USE_WARN_AFTER = 32
"""Accepted files the margin null's use is measured on before a validator warns that it is outgrown."""
