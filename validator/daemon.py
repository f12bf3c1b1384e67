"""The challenge daemon: judge every submission of a pool exactly once.

Loop: the persistent event cursor yields `WorkSubmitted` events (work id, worker, step, nonce,
rollout digest); submissions of our pool still Pending on-chain are fetched from IPFS by digest
(in threads, with a timeout), checked in checker processes (validator.checker_pool: one check
per process, each with its own deadline), and judged on-chain: `attest`, or `challenge` with the digest of an evidence document added to IPFS.

Hostile bytes never stop the loop. Whatever goes wrong with one submission stays with it: a
file that cannot be fetched is tried again with backoff (`fetch_attempts` in all, spread over
time) before it is challenged UNAVAILABLE; a check that crashes its process or overruns
`check_timeout_s` is retried in a fresh process and, after `max_checker_failures` such
failures, challenged UNCHECKABLE; a check that raised an infrastructure error, or a verdict
that could not be sent, is retried until the challenge window closes. Those submissions wait
in a retry book (validator.retries) that is saved before the cursor is committed, so after a
kill -9 nothing is lost; the on-chain status (re-read right before each verdict) makes every
redelivery harmless: every submission gets exactly one verdict.

Spot checks (protocol.spotcheck): when the pool's `spotCheckBps` is below 10000 a submission is
checked only once block B + 1 (B = its `WorkSubmitted` block) has `confirmations` blocks on top:
its hash seeds which completions get the expensive checks. Until then the submission waits in the
retry book (postponed, not counted as a failure).

Court pools (the pool's judge is the ValidatorCourt): verdicts go to the court, only for submissions
assigned to this validator or, after the assigned window, standing in for a silent one; the court's
own events bring audits of other validators' verdicts (`audit_rate`) and the committees this
validator sits on, whose work it re-checks before voting. Each such check is a `Submission` with a
`purpose` ("judge", "audit", "vote") and goes through the same fetch/check/retry machinery; the
follow-ups that fall due later (finalize, draw, reveal, resolve) are in validator.court.CourtDuties.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ledger_client.chain.bindings import CaseVoided, CommitteeDrawn, Disputed, DisputeReopened, VerdictFinal, VerdictGiven
from ledger_client.chain.errors import ContractRevert, TransactionFailed
from ledger_client.chain.events import EventCursor, Removed, latest_block, wait_for_a_block
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import (
    ZERO_ADDRESS,
    chain_time,
    court_of,
    get_work,
    pool_state,
    spot_check_block,
    submitted_event,
)
from ledger_client.ipfs.content import MAX_OBJECT_BYTES, ContentError, ContentUnavailable, get_object, put_object
from ledger_client.ipfs.kubo import KuboClient
from proofs.margins import MarginNull
from protocol.pool import CaseState, WorkStatus
from protocol.spotcheck import MAX_BPS
from protocol.verdicts import Evidence, Reason, SpotCheck, clip_text
from validator.checker_pool import CheckerPool, CheckFailure
from validator.court import Conduct, CourtDuties, CourtRules, audits, vote_commitment
from validator.retries import RetryBook
from validator.worker_margins import NullUse, WorkerMargins

log = logging.getLogger("proofswarm.validator")


@dataclass(frozen=True)
class Submission:
    """A `WorkSubmitted` event, as the validator needs it: judged by `work_id`, fetched by `rollout_digest`."""

    work_id: bytes
    pool_id: int
    worker: str
    step: int
    n_samples: int
    nonce: int
    rollout_digest: bytes
    submitted_at: int = 0
    block_number: int = 0
    """Block of the `WorkSubmitted` event as first seen (0: unknown)."""
    block_hash: bytes | None = None
    """That block's hash, as first seen (None: unknown): the spot check's block B + 1 is its child while no reorg
    moved the event, which saves looking the event up again."""
    spot_block: int | None = None
    """B, the block of the `WorkSubmitted` event the spot check is seeded from (set before the check)."""
    spot_block_hash: bytes | None = None
    """Hash of block B + 1 (set before the check when the pool spot-checks)."""
    seed_block: int = 0
    """The block that pinned the submission's step (`WorkSubmitted.seedBlock`): its hash seeds the file's sampling."""
    purpose: str = "judge"
    """Why the file is checked: "judge" (the first verdict), "audit" (another validator's verdict, court
    pools), "precheck" (an audit checked before the verdict it audits exists, so that the dispute or
    concurrence follows the verdict at once) or "vote" (a dispute this validator's committee decides)."""

    @property
    def key(self) -> str:
        """Its key in the retry book and the checker pool (one per work id and purpose)."""
        return self.work_id.hex() if self.purpose == "judge" else f"{self.purpose}:{self.work_id.hex()}"

    @classmethod
    def of_event(cls, e: Any) -> Submission:
        """From a decoded `WorkSubmitted` event."""
        return cls(bytes(e.work_id), e.pool_id, e.worker, e.step, e.n_samples, e.nonce, bytes(e.rollout_digest),
                   block_number=e.meta.block_number, block_hash=bytes(e.meta.block_hash), seed_block=e.seed_block)


@dataclass
class CheckOutcome:
    """The result of checking one rollout file."""

    ok: bool
    reason: Reason | None = None
    message: str = ""
    failing_samples: list[int] = field(default_factory=list)
    failing_chunks: dict[str, list[int]] = field(default_factory=dict)
    statistics: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    spot_check: dict[str, Any] | None = None
    """protocol.verdicts.SpotCheck fields, when the completion checks ran."""
    tokens: int = 0
    """Completion tokens in the file."""
    checked_tokens: int = 0
    """Completion tokens that got the expensive checks."""
    margins: dict[str, Any] = field(default_factory=dict)
    """The checked tokens' margin statistics for the per-worker test (validator.worker_margins): "tokens",
    "score", the pool's "null" (proofs.margins.MarginNull fields) and "worker_false_positive_rate"."""
    seconds: float = 0.0


class Checker(Protocol):
    """Checks one rollout file (runs inside a worker process)."""

    def check(self, submission: Submission, data: bytes) -> CheckOutcome: ...


class Metrics:
    """Prometheus metrics of one validator (its own registry, so several can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.backlog = Gauge("proofswarm_validator_backlog", "submissions seen and not yet judged", registry=self.registry)
        self.verdicts = Counter("proofswarm_validator_verdicts", "verdicts sent", ["verdict", "reason"],
                                registry=self.registry)
        self.latency = Histogram("proofswarm_validator_verify_seconds", "time to check one rollout file",
                                 registry=self.registry, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
        self.tokens = Counter("proofswarm_validator_tokens_verified", "completion tokens verified",
                              registry=self.registry)
        self.tokens_per_s = Gauge("proofswarm_validator_tokens_per_second", "tokens/s of the last check",
                                  registry=self.registry)
        self.errors = Counter("proofswarm_validator_check_errors", "checks that failed to run (no verdict sent)",
                              registry=self.registry)
        self.skipped = Counter("proofswarm_validator_skipped", "submissions already judged or outside the window",
                               registry=self.registry)
        self.check_failures = Counter("proofswarm_validator_check_failures",
                                      "checks that ended without an outcome", ["kind"], registry=self.registry)
        self.retries = Counter("proofswarm_validator_retries", "submissions put back for another attempt", ["kind"],
                               registry=self.registry)
        self.retry_queue = Gauge("proofswarm_validator_retry_queue", "submissions waiting for another attempt",
                                 registry=self.registry)
        self.checker_restarts = Counter("proofswarm_validator_checker_restarts",
                                        "checker processes replaced after a crash or timeout", registry=self.registry)
        self.waiting = Counter("proofswarm_validator_spot_check_waits",
                               "polls a submission waited for the block that seeds its spot check",
                               registry=self.registry)
        self.loop_errors = Counter("proofswarm_validator_loop_errors", "polls that failed (chain or IPFS down)",
                                   registry=self.registry)
        self.margin_null_use = Gauge("proofswarm_validator_margin_null_use",
                                     "accepted files' mean rounded margin per token over the null's mean (last 256 "
                                     "files): above 1, the pool's traffic has outgrown its calibration",
                                     registry=self.registry)

    def serve(self, port: int) -> None:
        start_http_server(port, addr="127.0.0.1", registry=self.registry)


@dataclass
class DaemonConfig:
    pool_id: int
    state_dir: Path
    kubo_api: str
    fetch_timeout_s: float = 20.0
    fetch_attempts: int = 3
    """Fetches of a file before it is challenged UNAVAILABLE (fewer if the window is closing)."""
    retry_backoff_s: float = 10.0
    """Delay before the second attempt of anything; doubles with each further attempt."""
    check_timeout_s: float = 300.0
    max_checker_failures: int = 3
    """Crashes or timeouts of the checker on one file before it is challenged UNCHECKABLE."""
    verdict_margin_s: float = 30.0
    """A fetch retry that would end later than this before the window closes is not waited for."""
    processes: int = 1
    max_in_flight: int = 8
    max_checks_per_poll: int = 16
    """Files checked in one poll at most; the rest wait for the next (in the retry book, no attempt counted), so a
    backlog cannot hold up the court duties a poll ends with (a vote's commit period is 20 s in the demo: with
    every file of a poll checked first, an honest validator under load missed commits and paid the penalty)."""
    confirmations: int = 0
    poll_interval_s: float = 0.5
    audit_rate: float = 0.1
    """Court pools: the fraction of other validators' verdicts re-checked (and disputed if wrong)."""
    device: str = "cpu"
    """Where the checker processes run the float32 reference prefill (`validator start --device`: cpu, cuda,
    cuda:N); validator.checks.checker_factory hands it to each checker process."""


class ValidatorDaemon:
    """Judges the submissions of one pool; `run()` until `stop` is set, or `run_once()` per poll."""

    def __init__(self, ledger: Ledger, config: DaemonConfig, checker_factory: Callable[[], Checker],
                 metrics: Metrics | None = None, conduct: Conduct | None = None):
        self.ledger = ledger
        self.config = config
        self.conduct = conduct or Conduct()
        self.metrics = metrics or Metrics()
        self.kubo = KuboClient(config.kubo_api)
        config.state_dir.mkdir(parents=True, exist_ok=True)
        self.cursor = EventCursor(ledger.pool, ["WorkSubmitted"], config.state_dir / "cursor.json",
                                  confirmations=config.confirmations, start_block=ledger.deployment.block)
        self.journal_path = config.state_dir / "verdicts.jsonl"
        self.retries = RetryBook(config.state_dir / "retries.json")
        self.pool = pool_state(ledger, config.pool_id)
        self.worker_margins = WorkerMargins(config.state_dir / "worker_margins.json")
        self.null_use = NullUse()
        self._null_use_warned = False
        self.checkers = CheckerPool(checker_factory, processes=config.processes,
                                    check_timeout_s=config.check_timeout_s)
        self._fetchers = ThreadPoolExecutor(max_workers=max(2, config.max_in_flight))
        self._chain_time: tuple[float, int] | None = None  # (monotonic clock when read, the latest block's timestamp)
        self._head: int | None = None  # the latest block's number at this poll's start
        self.court = court_of(ledger, config.pool_id)
        if self.court is not None:
            self.rules = CourtRules.of(self.court.get_params(config.pool_id))
            self.duties = CourtDuties(config.state_dir / "court.json")
            self._prechecked: dict[bytes, CheckOutcome] = {}
            """This validator's outcomes of files whose verdict it has not seen yet — prechecks, and judge checks
            another validator's verdict beat (`_keep_for_audit`) — for the verdict's audit or a stand-in's verdict
            (memory only: after a restart the verdict's audit checks the file again)."""
            self._audits_ready: list[tuple[Submission, CheckOutcome]] = []
            # a case final or void needs no finalize: knowing it from the events saves a reverted estimate a file
            # (with early finality most verdicts are final at their last concurrence, or at once)
            ends = ["VerdictFinal", "CaseVoided"]
            self.court_cursor = EventCursor(self.court, ["VerdictGiven", "Disputed", "DisputeReopened", "CommitteeDrawn",
                                                         *ends], config.state_dir / "court_cursor.json",
                                            confirmations=config.confirmations, start_block=ledger.deployment.block,
                                            added_events=ends)

    def close(self) -> None:
        self.checkers.close()
        self._fetchers.shutdown(cancel_futures=True)
        self.kubo.close()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                judged = self.run_once()
            except Exception as exc:  # noqa: BLE001 - chain or IPFS down: log, wait, poll again
                log.error("poll failed: %s: %s", exc.__class__.__name__, exc)
                self.metrics.loop_errors.inc()
                judged = 0
                stop.wait(max(self.config.poll_interval_s, 2.0))
            if judged == 0:  # the next poll at the next block (new work comes with one), or after the interval
                wait_for_a_block(self.ledger.w3, self._head, stop, self.config.poll_interval_s)

    def run_once(self) -> int:
        """One poll: judge every new submission and every retry that is due, save what is left for
        later, then commit the cursor. Returns how many verdicts were sent."""
        latest = latest_block(self.ledger.w3)  # one read for both cursors, the chain's clock and the spot checks
        self._chain_time, self._head = (time.monotonic(), latest["timestamp"]), latest["number"]
        events = [e for e in self.cursor.poll(latest)
                  if not isinstance(e, Removed) and e.pool_id == self.config.pool_id]
        subs = [Submission.of_event(e) for e in events]
        if self.court is not None:
            subs += self._court_events(latest)
            subs += [replace(s, purpose="precheck") for s in subs if s.purpose == "judge"
                     and self.conduct.judges and self.conduct.checks
                     and audits(self.ledger.address, s.work_id, self.config.audit_rate)]
        seen = {s.key for s in subs}
        subs += [s for s in map(_submission_from, self.retries.due()) if s.key not in seen]
        if self.court is not None:  # a verdict seen with its precheck still to run: its audit checks the file
            audited = {s.work_id for s in subs if s.purpose == "audit"}
            for s in [s for s in subs if s.purpose == "precheck" and s.work_id in audited]:
                subs.remove(s)
                self.retries.drop(s.key)
        judged = self._judge_all(subs)
        if self.court is not None:
            while self._audits_ready:
                self._audited(*self._audits_ready.pop(0))
            self._run_duties()
            self.duties.save()
        self.retries.save()
        self.metrics.retry_queue.set(len(self.retries.entries))
        self.cursor.commit()
        if self.court is not None:
            self.court_cursor.commit()
        return judged

    # ------------------------------------------------------------------ judging

    def _judge_all(self, subs: list[Submission]) -> int:
        todo = []
        for s in subs:
            try:
                if self.court is None:
                    work = get_work(self.ledger, s.work_id)
                    wanted, submitted_at = work.status == WorkStatus.PENDING, work.submitted_at
                else:  # the court's case says all: the pool's work stays pending until the court ends it
                    wanted, submitted_at = self._court_wants(s)
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
            if self.pool.spot_check_bps < MAX_BPS:
                try:
                    seed = spot_check_block(self.ledger, s.work_id, self.config.confirmations, s.block_number,
                                            s.block_hash, self._head)
                except Exception as exc:  # noqa: BLE001 - our chain connection: try again later
                    self._defer(s, "errors", f"{exc.__class__.__name__}: {exc}")
                    continue
                if seed is None:  # block B + 1 is not there yet: the randomness does not exist
                    self.retries.postpone(s.key, _submission_to(s), AT_THE_NEXT_POLL)
                    self.metrics.waiting.inc()
                    continue
                s = replace(s, spot_block=seed[0], spot_block_hash=seed[1])
            todo.append(s)
        self.metrics.backlog.set(len(todo))
        # the tightest deadlines first: a first verdict's assigned window, then a committee's commit period, then
        # audits (the dispute window); oldest submission first within each
        queue = sorted(todo, key=lambda s: (CHECK_ORDER.get(s.purpose, 0), s.submitted_at))
        settled: list[tuple[Submission, CheckOutcome | CheckFailure]] = []
        judged = 0
        if self.court is not None:
            queue, checked = self._checked_once(queue)
            judged += sum(self._settle(s, outcome, fresh=False) for s, outcome in checked)
        if not self.conduct.checks:  # a rubber stamp answers from its conduct alone
            settled += [(s, CheckOutcome(True, message="not checked")) for s in queue]
            queue = []
        else:
            for s in queue[self.config.max_checks_per_poll:]:
                self.retries.postpone(s.key, _submission_to(s), 0.0)
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

    def _checked_once(self, queue: list[Submission]) -> tuple[list[Submission], list[tuple[Submission, CheckOutcome]]]:
        """A court file is checked once by this validator: a judge check (a stand-in's, once the assignee was slow)
        takes the outcome of the file's precheck, and a precheck queued beside its file's judge check is dropped
        (a judge that loses the race keeps its outcome for the audit: `_court_verdict`). Returns the files left to
        check and the judge checks answered already."""
        judging = {s.work_id for s in queue if s.purpose == "judge"}
        left, checked = [], []
        for s in queue:
            if s.purpose == "judge" and s.work_id in self._prechecked:
                checked.append((s, self._prechecked.pop(s.work_id)))
            elif s.purpose == "precheck" and s.work_id in judging:
                self.retries.drop(s.key)
                self.metrics.backlog.dec()
            else:
                left.append(s)
        return left, checked

    def _keep_for_audit(self, work_id: bytes, outcome: CheckOutcome) -> None:
        """An outcome whose verdict is not ours to send (prechecked, or another judge was first): the verdict's
        audit uses it instead of checking the file again."""
        self._prechecked[work_id] = outcome
        while len(self._prechecked) > MAX_PRECHECKED:  # verdicts never seen (judged while we were away)
            self._prechecked.pop(next(iter(self._prechecked)))

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
        if s.purpose == "precheck":  # kept for the verdict; a file that failed to fetch or check is audited after it
            self.retries.drop(s.key)
            if isinstance(result, CheckOutcome):
                self._observe(result)
                self._keep_for_audit(s.work_id, result)
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
            entry = self.retries.record(key, _submission_to(s), "fetch", failure.message, self.config.retry_backoff_s)
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
            entry = self.retries.record(key, _submission_to(s), "checker", f"{failure.kind}: {failure.message}",
                                        backoff_s=0.0)
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
        """Chain time by which what this check is for must be sent: a permissioned pool's challenge window; in a
        court pool the verdict window (judge), the dispute window after the verdict (audit — a withheld file
        attested by an accomplice must be disputed before it is final) or the commit period (vote)."""
        if self.court is None:
            return s.submitted_at + self.pool.challenge_window_s
        if s.purpose == "audit":
            return self.court.cases(s.work_id).verdict_at + self.rules.dispute_window
        if s.purpose == "vote":
            return self.court.disputes(s.work_id).disputed_at + self.rules.commit_period
        return s.submitted_at + self.rules.verdict_window

    def _defer(self, s: Submission, kind: str, message: str) -> None:
        self.retries.record(s.key, _submission_to(s), kind, message, self.config.retry_backoff_s)
        self.metrics.retries.labels(kind).inc()

    def _conclude(self, s: Submission, outcome: CheckOutcome) -> int:
        """Act on a check's outcome as its purpose says; returns 1 if a verdict was sent."""
        if outcome.ok and outcome.margins:
            self._watch_null(outcome.margins)
        if s.purpose == "audit":
            return self._audited(s, outcome)
        if s.purpose == "vote":
            return self._voted(s, outcome)
        if self.court is not None:
            return self._court_verdict(s, outcome)
        return self._verdict(s, outcome)

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
                self.ledger.pool.challenge(s.work_id, int(outcome.reason), self._evidence(s, outcome))
                verdict, reason = "challenged", outcome.reason.name
        except ContractRevert as exc:
            if exc.error in ("AlreadyJudged", "ChallengeWindowClosed"):
                self.metrics.skipped.inc()
                self.retries.drop(s.work_id.hex())
                return 0
            raise
        self._journal(s, verdict, reason, outcome.message)
        return 1

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
        evidence = self.worker_margins.judge(s.worker, "0x" + s.work_id.hex(), m["tokens"], m["score"],
                                             MarginNull(**m["null"]), m["worker_false_positive_rate"])
        if evidence is None:
            return outcome
        return replace(outcome, ok=False, reason=Reason.SAMPLING, statistics={"worker_margins": evidence},
                       thresholds={"margin_null": m["null"]},
                       message=f"the worker's margins over {evidence['files']} files ({evidence['score']:.3f} over "
                               f"{evidence['tokens']} tokens) are off the honest distribution: e-value "
                               f"e^{evidence['log_e_value']:.1f} >= 1/{evidence['worker_false_positive_rate']:g}")

    def _journal(self, s: Submission, verdict: str, reason: str, message: str) -> None:
        self.retries.drop(s.key)
        self.metrics.verdicts.labels(verdict, reason).inc()
        with open(self.journal_path, "a") as journal:
            journal.write(json.dumps({"work_id": "0x" + s.work_id.hex(), "worker": s.worker, "verdict": verdict,
                                      "reason": reason, "message": clip_text(message)}) + "\n")
        log.info("work 0x%s from %s: %s (%s)", s.work_id.hex(), s.worker, verdict, reason)

    def _evidence(self, s: Submission, outcome: CheckOutcome) -> bytes:
        """Add the evidence document of a failed check to IPFS; returns its digest."""
        evidence = Evidence(
            work_id="0x" + s.work_id.hex(), pool_id=s.pool_id, worker=s.worker, reason=outcome.reason.name,
            reason_code=int(outcome.reason), message=outcome.message, failing_samples=outcome.failing_samples,
            failing_chunks=outcome.failing_chunks, statistics=outcome.statistics,
            thresholds=outcome.thresholds, validator=self.ledger.address,
            spot_check=SpotCheck(**outcome.spot_check) if outcome.spot_check else None,
        )
        return put_object(self.kubo, _evidence_bytes(evidence))

    # ------------------------------------------------------------------ court pools

    def _now(self) -> int:
        """The timestamp the next block will have, about: devnets mine blocks only on transactions, so
        the latest block's timestamp lags wall time until someone sends one. The latest block is asked for
        at most every CHAIN_TIME_TTL_S (a poll asked for it several times per submission)."""
        now = time.monotonic()
        if self._chain_time is None or now - self._chain_time[0] > CHAIN_TIME_TTL_S:
            self._chain_time = (now, chain_time(self.ledger))
        return max(self._chain_time[1], int(time.time()))

    def _court_wants(self, s: Submission) -> tuple[bool | None, int]:
        """Whether a court pool's submission should be checked now for `s.purpose` — True, False (never:
        judged, not ours, too late) or None (not yet: postponed in the retry book) — and its submission time."""
        case = self.court.cases(s.work_id)
        return self._case_wants(s, case), case.submitted_at

    def _case_wants(self, s: Submission, case: Any) -> bool | None:
        """`_court_wants`'s decision, from the case as just read."""
        me, rules = self.ledger.address, self.rules
        state, submitted_at, submitted_block = case.state, case.submitted_at, case.submitted_block
        if s.purpose == "judge":
            if state != CaseState.PENDING or not self.conduct.judges:
                return False
            now = self._now()
            if now > submitted_at + rules.verdict_window:
                return False
            assigned = self._drawn(s, submitted_block)
            if assigned is None:
                return None
            if assigned not in (ZERO_ADDRESS, me):
                unrecorded = case.assigned == 0
                record_at = submitted_block + RECORD_DRAW_AFTER_BLOCKS + _stagger(me, s.work_id, RECORD_DRAW_AFTER_BLOCKS)
                if unrecorded and self._poll_head() > record_at:
                    self._record_draw(s.work_id)  # the assignee is silent: keep its draw past the 256-block horizon
                    unrecorded = False
                opens = submitted_at + rules.assigned_window + 1
                if now < opens and not self._can_judge(assigned):
                    opens = submitted_at  # without a verdict's reservation it cannot judge: no window to wait out
                stand_in_at = opens + _stagger(me, s.work_id, STAND_IN_SPREAD_S)
                if now < stand_in_at:  # the assigned validator's turn; then stand-ins, one after another
                    wait = stand_in_at - now
                    self.retries.postpone(s.key, _submission_to(s), min(wait, RECORD_DRAW_CHECK_S) if unrecorded else wait)
                    return None
            return True
        if s.purpose == "audit":
            return state == CaseState.VERDICT and self._now() <= case.verdict_at + rules.dispute_window
        if s.purpose == "precheck":
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
        if assigned == ZERO_ADDRESS and self._poll_head() <= submitted_block + 1:
            self.retries.postpone(s.key, _submission_to(s), AT_THE_NEXT_POLL)
            return None
        return assigned

    def _poll_head(self) -> int:
        """The latest block's number as this poll read it (asked now outside a poll)."""
        return self._head if self._head is not None else self.ledger.w3.eth.block_number

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

    def _court_verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        """The first verdict, sent to the court (final only after the dispute window: then `finalize`)."""
        checked, ok = outcome, self.conduct.verdict(outcome.ok)
        try:
            if ok:
                self.court.attest(s.work_id)
                verdict, reason = "accepted", "ok"
            else:
                if outcome.ok:  # a dishonest conduct challenges work that passed: it makes up a reason
                    outcome = CheckOutcome(False, Reason.TOPLOC, f"{self.conduct.name}: challenged without cause")
                self.court.challenge(s.work_id, int(outcome.reason), self._evidence(s, outcome))
                verdict, reason = "challenged", outcome.reason.name
        except TransactionFailed:  # another validator's verdict was mined first (stand-ins race)
            if self.court.cases(s.work_id).state != CaseState.PENDING:
                self._keep_for_audit(s.work_id, checked)
                self.metrics.skipped.inc()
                self.retries.drop(s.key)
                return 0
            raise
        except ContractRevert as exc:
            if exc.error in ("NotAssigned", "AssignmentNotDrawn"):
                self.retries.postpone(s.key, _submission_to(s), max(self.config.poll_interval_s, 1.0))
                return 0
            if exc.error == "InsufficientBond":  # every locked unit backs an open verdict: wait for one to be final
                log.warning("work 0x%s: %s (lock more with a larger bond); trying again", s.work_id.hex(), exc)
                self.retries.postpone(s.key, _submission_to(s), max(self.config.poll_interval_s, 2.0))
                return 0
            if exc.error in ("WrongCaseState", "OutsidePeriod", "SubmissionNotPending", "NotEligible"):
                log.info("work 0x%s: no verdict from us: %s", s.work_id.hex(), exc)
                if exc.error == "WrongCaseState":  # judged by another validator meanwhile
                    self._keep_for_audit(s.work_id, checked)
                if exc.error == "NotEligible":  # not in the case's set: if nobody judges, void the case then
                    lapses = self.court.cases(s.work_id).submitted_at + self.rules.verdict_window + 1
                    self.duties.book.finalize.setdefault(s.work_id.hex(), lapses)
                self.metrics.skipped.inc()
                self.retries.drop(s.key)
                return 0
            raise
        self.duties.book.finalize[s.work_id.hex()] = self._now() + self.rules.dispute_window + 1
        self.duties.count("verdicts")
        self._journal(s, verdict, reason, outcome.message)
        return 1

    def _audited(self, s: Submission, outcome: CheckOutcome) -> int:
        """Dispute another validator's verdict that this check contradicts; concur with one it confirms (once
        every validator that may dispute has concurred, the verdict is final without waiting for the window)."""
        self.retries.drop(s.key)
        case = self.court.cases(s.work_id)
        if case.state != CaseState.VERDICT:
            return 0
        if outcome.ok == case.accepted:
            self._court_call("concurred", s.work_id.hex(), self._concur, s.work_id)
            return 0
        digest = self._evidence(s, outcome) if not outcome.ok else put_object(
            self.kubo, json.dumps({"work_id": "0x" + s.work_id.hex(), "validator": self.ledger.address,
                                   "finding": "every check passed"}).encode())
        try:
            receipt = self.court.dispute(s.work_id, digest)
        except TransactionFailed:  # another auditor's dispute was mined first
            if self.court.cases(s.work_id).state != CaseState.VERDICT:
                return 0
            raise
        except ContractRevert as exc:
            if exc.error in ("WrongCaseState", "OutsidePeriod", "NotEligible", "NotRegistered"):
                return 0
            raise
        key = s.work_id.hex()
        self.duties.book.draw[key] = receipt["blockNumber"]
        self.duties.book.resolve[key] = self._now() + self.rules.commit_period + self.rules.reveal_period + 1
        self.duties.count("disputes")
        log.info("work 0x%s: disputed the verdict (%s)", key, "valid" if outcome.ok else outcome.reason.name)
        return 0

    def _concur(self, work_id: bytes) -> None:
        """`concur`, with the gas of the last concurrence (which makes the verdict final) whoever is last: the
        other validators concur at about the same time, and an estimate taken before theirs is mined is short."""
        self.court.sender.send(self.court.function("concur", work_id), function="concur", min_gas=CONCUR_GAS)

    def _voted(self, s: Submission, outcome: CheckOutcome) -> int:
        """Decide and commit this committee member's vote (salt saved first, revealed later)."""
        self.retries.drop(s.key)
        key = s.work_id.hex()
        if key in self.duties.book.votes:
            return 0
        disputed_at = self.court.disputes(s.work_id).disputed_at
        vote = self.duties.new_vote(s.work_id, self.conduct.vote(outcome.ok),
                                    reveal_after=disputed_at + self.rules.commit_period,
                                    resolve_after=disputed_at + self.rules.commit_period + self.rules.reveal_period + 1)
        self._commit(s.work_id, vote)
        return 0

    def _commit(self, work_id: bytes, vote) -> None:
        commitment = vote_commitment(work_id, self.ledger.address, vote.valid, bytes.fromhex(vote.salt))
        if bytes(self.court.votes(work_id, self.ledger.address)) != commitment:
            self.court.commit_vote(work_id, commitment)
        vote.committed = True
        self.duties.count("votes")
        self.duties.save()

    def _court_events(self, latest: Any) -> list[Submission]:
        """Audits and committee seats from the court's events; every verdict and dispute also becomes a
        follow-up (finalize, draw, resolve) that anyone may do once it falls due."""
        me, rules, out = self.ledger.address, self.rules, []
        for e in self.court_cursor.poll(latest):
            if isinstance(e, Removed):
                continue
            key = bytes(e.work_id).hex()
            if isinstance(e, VerdictGiven) and e.pool_id == self.config.pool_id:
                # the judge is paid to finalize: the others follow up only if it does not
                grace = 0 if e.judge == me else FOLLOW_UP_GRACE_S + _stagger(me, bytes(e.work_id), FOLLOW_UP_GRACE_S)
                self.duties.book.finalize.setdefault(key, self._now() + rules.dispute_window + 1 + grace)
                if e.judge != me and self.conduct.judges and audits(me, bytes(e.work_id), self.config.audit_rate):
                    prechecked = self._prechecked.pop(bytes(e.work_id), None)
                    if not self.conduct.checks:  # a rubber stamp concurs unchecked
                        prechecked = CheckOutcome(e.accepted, message="not checked")
                    audit = self._submission_of(bytes(e.work_id), "audit")
                    if prechecked is None:
                        out += audit
                    else:
                        log.debug("work 0x%s: audited by its precheck", key)
                        self._audits_ready += [(a, prechecked) for a in audit]
            elif isinstance(e, (Disputed, DisputeReopened)) and e.pool_id == self.config.pool_id:
                self.duties.book.finalize.pop(key, None)
                self.duties.book.votes.pop(key, None)  # a reopened dispute: the last committee's seat is gone
                # the disputer draws and resolves first; the others only if it does not
                first = isinstance(e, Disputed) and e.disputer == me
                later = 0 if first else FOLLOW_UP_GRACE_S + _stagger(me, bytes(e.work_id), FOLLOW_UP_GRACE_S)
                self.duties.book.draw.setdefault(key, e.meta.block_number + (0 if first else 2))
                self.duties.book.resolve.setdefault(key, self._now() + rules.commit_period + rules.reveal_period + 1
                                                    + later)
            elif isinstance(e, CommitteeDrawn) and me in e.committee and self.conduct.votes:
                out += self._submission_of(bytes(e.work_id), "vote")
            elif isinstance(e, (VerdictFinal, CaseVoided)) and e.pool_id == self.config.pool_id:
                self.duties.book.finalize.pop(key, None)
        return out

    def _submission_of(self, work_id: bytes, purpose: str) -> list[Submission]:
        event = submitted_event(self.ledger, work_id)
        if event is None:
            return []
        a = event["args"]
        return [Submission(work_id, a["poolId"], a["worker"], a["step"], a["nSamples"], a["nonce"],
                           bytes(a["rolloutDigest"]), block_number=event["blockNumber"],
                           block_hash=bytes(event["blockHash"]), purpose=purpose, seed_block=a["seedBlock"])]

    def _run_duties(self) -> None:
        """Do every court follow-up that is due; one that fails stays for the next poll."""
        book, now, block = self.duties.book, self._now(), self._head  # run_once read the head
        for key, due in list(book.finalize.items()):
            if now >= due and self._court_call("finalize", key, self.court.finalize, bytes.fromhex(key)):
                book.finalize.pop(key)
        for key, dispute_block in list(book.draw.items()):
            if block > dispute_block + 1 and self._court_call("drawn", key, self.court.draw_committee,
                                                               bytes.fromhex(key)):
                book.draw.pop(key)
                dispute = self.court.disputes(bytes.fromhex(key))
                if not dispute.drawn and dispute.dispute_block > dispute_block:
                    # past the block-hash horizon the court anchored the draw to a later block: draw again then
                    book.draw[key] = dispute.dispute_block
        for key, vote in list(book.votes.items()):
            if not vote.committed:
                if self._court_call("committed", key, self._commit, bytes.fromhex(key), vote) and not vote.committed:
                    book.votes.pop(key)  # the commit period ended before the vote could be committed
            elif now > vote.reveal_after and self._court_call("revealed", key, self.court.reveal_vote,
                                                               bytes.fromhex(key), vote.valid, bytes.fromhex(vote.salt)):
                book.resolve.setdefault(key, vote.resolve_after)
                book.votes.pop(key)
        for key, due in list(book.resolve.items()):
            if now >= due and self._court_call("resolved", key, self.court.resolve, bytes.fromhex(key)):
                book.resolve.pop(key)

    def _court_call(self, what: str, key: str, call, *args) -> bool:
        """Run one follow-up; True when it is done (or can never be done: the case moved on without it)."""
        try:
            call(*args)
        except TransactionFailed:  # another validator's follow-up was mined first; the next poll re-checks
            log.info("work 0x%s: %s lost a race; checking again next poll", key, what)
            return False
        except ContractRevert as exc:
            if exc.error == "OutsidePeriod" and what != "drawn":
                return what in ("committed", "revealed") and exc.args_dict.get("until", 0) < self._now()
            if exc.error in ("WrongCaseState", "OutsidePeriod", "NotCommitteeMember", "RevealMismatch",
                             "AlreadyCommitted", "AlreadyConcurred", "NotEligible", "NotRegistered"):
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


MAX_PRECHECKED = 4096
"""Prechecked outcomes kept for verdicts still to come; beyond this the oldest go (they are checked again
if their verdict comes)."""
NULL_USE_WARN_AFTER = 32
"""Accepted files the margin null's use is measured on before a validator warns that it is outgrown."""
CONCUR_GAS = 400_000
"""Gas limit of a `concur`: above the ~220k of one that makes a challenge final (the worker slashed, the bounty
paid: forge's gas report of test_aChallengeEveryOtherValidatorConcursWithSlashesAtOnce); a transaction pays only
for the gas it uses."""
CHECK_ORDER = {"judge": 0, "vote": 1, "audit": 2, "precheck": 3}
"""The order a poll's checks run in, by purpose (`_judge_all`): deadlines first (a first verdict's assigned window,
a vote's commit period, an audit's dispute window); prechecks, which only hasten an audit, last — under a backlog
they wait, and once the verdict is out its audit replaces them."""
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
AT_THE_NEXT_POLL = 0.0
"""The retry delay of a file that waits for a block to come (the court's draw needs block B + 2, the spot check's
randomness B + 1): polls come with each new block (or the poll interval), so it is looked at again then. Waiting a
poll interval instead kept a devnet file ~0.5 s from its verdict — a trainer step of the CPU recipe."""
CHAIN_TIME_TTL_S = 0.25
"""How long the validator reuses the latest block's timestamp (`_now`): a court's windows are seconds long, and
wall time, which `_now` never falls behind, goes on meanwhile."""


def _stagger(validator: str, work_id: bytes, spread_s: int) -> int:
    """This validator's own offset in [0, spread_s) for a work: a fixed function of both."""
    return int.from_bytes(hashlib.sha256(validator.lower().encode() + work_id).digest()[:4], "big") % max(spread_s, 1)


def _evidence_bytes(evidence: Evidence) -> bytes:
    """The evidence document, shed of its statistics if even bounded they would not fit one object."""
    data = evidence.model_dump_json().encode()
    if len(data) > MAX_OBJECT_BYTES:
        data = evidence.model_copy(update={"statistics": {"omitted": "too large"}, "failing_chunks": {},
                                           "failing_samples": evidence.failing_samples[:64]}).model_dump_json().encode()
    return data


def _submission_to(s: Submission) -> dict:
    return {"work_id": s.work_id.hex(), "pool_id": s.pool_id, "worker": s.worker, "step": s.step,
            "n_samples": s.n_samples, "nonce": s.nonce, "rollout_digest": s.rollout_digest.hex(),
            "block_number": s.block_number, "purpose": s.purpose, "seed_block": s.seed_block,
            "block_hash": s.block_hash.hex() if s.block_hash else None}


def _submission_from(d: dict) -> Submission:
    return Submission(bytes.fromhex(d["work_id"]), d["pool_id"], d["worker"], d["step"], d["n_samples"],
                      d["nonce"], bytes.fromhex(d["rollout_digest"]), block_number=d.get("block_number", 0),
                      purpose=d.get("purpose", "judge"), seed_block=d.get("seed_block", 0),
                      block_hash=bytes.fromhex(d["block_hash"]) if d.get("block_hash") else None)
