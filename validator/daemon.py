"""The challenge daemon: judge every submission of a pool exactly once.

Loop: the persistent event cursor yields `WorkSubmitted` events (work id, worker, step, nonce,
rollout digest); submissions of our pool still Pending on-chain are fetched from IPFS by digest (in threads, with a timeout — unavailable files are
challenged), checked in a pool of worker processes (bounded: at most `max_in_flight` at once),
and judged on-chain: `attest`, or `challenge` with the digest of an evidence document added to
IPFS. The cursor is committed only after every submission of a batch has its verdict, so after
a kill -9 the batch is delivered again; the on-chain status (re-read right before each verdict)
makes the redelivery harmless: every submission gets exactly one verdict.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ledger_client.chain.errors import ContractRevert
from ledger_client.chain.events import EventCursor, Removed
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import chain_time, get_work, pool_state
from ledger_client.ipfs.content import ContentError, ContentUnavailable, get_object, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.pool import WorkStatus
from protocol.verdicts import Evidence, Reason

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

    @classmethod
    def of_event(cls, e: Any) -> Submission:
        """From a decoded `WorkSubmitted` event."""
        return cls(bytes(e.work_id), e.pool_id, e.worker, e.step, e.n_samples, e.nonce, bytes(e.rollout_digest))


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
    tokens: int = 0
    seconds: float = 0.0


class Checker(Protocol):
    """Checks one rollout file (runs inside a worker process)."""

    def check(self, submission: Submission, data: bytes) -> CheckOutcome: ...


_PROCESS_CHECKER: Checker | None = None


def _init_process(factory: Callable[[], Checker]) -> None:
    global _PROCESS_CHECKER
    _PROCESS_CHECKER = factory()


def _check_in_process(submission: Submission, data: bytes) -> CheckOutcome:
    assert _PROCESS_CHECKER is not None
    t0 = time.perf_counter()
    outcome = _PROCESS_CHECKER.check(submission, data)
    outcome.seconds = time.perf_counter() - t0
    return outcome


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

    def serve(self, port: int) -> None:
        start_http_server(port, addr="127.0.0.1", registry=self.registry)


@dataclass
class DaemonConfig:
    pool_id: int
    state_dir: Path
    kubo_api: str
    fetch_timeout_s: float = 20.0
    processes: int = 1
    max_in_flight: int = 8
    confirmations: int = 0
    poll_interval_s: float = 0.5


class ValidatorDaemon:
    """Judges the submissions of one pool; `run()` until `stop` is set, or `run_once()` per poll."""

    def __init__(self, ledger: Ledger, config: DaemonConfig, checker_factory: Callable[[], Checker],
                 metrics: Metrics | None = None):
        self.ledger = ledger
        self.config = config
        self.metrics = metrics or Metrics()
        self.kubo = KuboClient(config.kubo_api)
        config.state_dir.mkdir(parents=True, exist_ok=True)
        self.cursor = EventCursor(ledger.pool, ["WorkSubmitted"], config.state_dir / "cursor.json",
                                  confirmations=config.confirmations, start_block=ledger.deployment.block)
        self.journal_path = config.state_dir / "verdicts.jsonl"
        self.pool = pool_state(ledger, config.pool_id)
        self._executor = ProcessPoolExecutor(max_workers=config.processes, mp_context=get_context("spawn"),
                                             initializer=_init_process, initargs=(checker_factory,))
        self._fetchers = ThreadPoolExecutor(max_workers=max(2, config.max_in_flight))

    def close(self) -> None:
        self._executor.shutdown(cancel_futures=True)
        self._fetchers.shutdown(cancel_futures=True)
        self.kubo.close()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if self.run_once() == 0:
                stop.wait(self.config.poll_interval_s)

    def run_once(self) -> int:
        """One poll: judge every new submission, then commit the cursor. Returns how many were judged."""
        events = [e for e in self.cursor.poll() if not isinstance(e, Removed) and e.pool_id == self.config.pool_id]
        subs = [Submission.of_event(e) for e in events]
        judged = self._judge_all(subs)
        self.cursor.commit()
        return judged

    # ------------------------------------------------------------------ judging

    def _judge_all(self, subs: list[Submission]) -> int:
        todo = []
        for s in subs:
            work = get_work(self.ledger, s.work_id)
            if work.status != WorkStatus.PENDING:
                self.metrics.skipped.inc()
                continue
            todo.append(replace(s, submitted_at=work.submitted_at))
        self.metrics.backlog.set(len(todo))
        judged = 0
        in_flight: list[tuple[Submission, Future]] = []
        fetches = {s.work_id: self._fetchers.submit(self._fetch, s) for s in todo}
        for s in todo:
            data_or_outcome = fetches[s.work_id].result()
            if isinstance(data_or_outcome, CheckOutcome):
                judged += self._verdict(s, data_or_outcome)
                self.metrics.backlog.dec()
                continue
            while len(in_flight) >= self.config.max_in_flight:
                judged += self._finish(*in_flight.pop(0))
            in_flight.append((s, self._executor.submit(_check_in_process, s, data_or_outcome)))
        for s, fut in in_flight:
            judged += self._finish(s, fut)
        return judged

    def _fetch(self, s: Submission) -> bytes | CheckOutcome:
        try:
            return get_object(self.kubo, s.rollout_digest, timeout=self.config.fetch_timeout_s)
        except ContentUnavailable as exc:
            return CheckOutcome(False, Reason.UNAVAILABLE, str(exc))
        except ContentError as exc:
            return CheckOutcome(False, Reason.DIGEST_MISMATCH, str(exc))

    def _finish(self, s: Submission, fut: Future) -> int:
        try:
            outcome: CheckOutcome = fut.result()
        except Exception as exc:  # noqa: BLE001 - a checker failure is ours (or the trainer's), not the worker's
            log.error("could not check work 0x%s: %s: %s", s.work_id.hex(), exc.__class__.__name__, exc)
            self.metrics.errors.inc()
            self.metrics.backlog.dec()
            return 0
        self.metrics.latency.observe(outcome.seconds)
        if outcome.tokens:
            self.metrics.tokens.inc(outcome.tokens)
            self.metrics.tokens_per_s.set(outcome.tokens / max(outcome.seconds, 1e-9))
        self.metrics.backlog.dec()
        return self._verdict(s, outcome)

    def _verdict(self, s: Submission, outcome: CheckOutcome) -> int:
        """Send the verdict unless the submission was judged meanwhile; returns 1 if one was sent."""
        work = get_work(self.ledger, s.work_id)
        if work.status != WorkStatus.PENDING:
            self.metrics.skipped.inc()
            return 0
        if chain_time(self.ledger) > work.submitted_at + self.pool.challenge_window_s:
            log.warning("work 0x%s: challenge window closed before a verdict", s.work_id.hex())
            self.metrics.skipped.inc()
            return 0
        try:
            if outcome.ok:
                self.ledger.pool.attest(s.work_id)
                verdict, reason = "accepted", "ok"
            else:
                evidence = Evidence(
                    work_id="0x" + s.work_id.hex(), pool_id=s.pool_id, worker=s.worker, reason=outcome.reason.name,
                    reason_code=int(outcome.reason), message=outcome.message, failing_samples=outcome.failing_samples,
                    failing_chunks=outcome.failing_chunks, statistics=outcome.statistics,
                    thresholds=outcome.thresholds, validator=self.ledger.address,
                )
                digest = put_object(self.kubo, evidence.model_dump_json().encode())
                self.ledger.pool.challenge(s.work_id, int(outcome.reason), digest)
                verdict, reason = "challenged", outcome.reason.name
        except ContractRevert as exc:
            if exc.error in ("AlreadyJudged", "ChallengeWindowClosed"):
                self.metrics.skipped.inc()
                return 0
            raise
        self.metrics.verdicts.labels(verdict, reason).inc()
        with open(self.journal_path, "a") as journal:
            journal.write(json.dumps({"work_id": "0x" + s.work_id.hex(), "worker": s.worker, "verdict": verdict,
                                      "reason": reason, "message": outcome.message}) + "\n")
        log.info("work 0x%s from %s: %s (%s)", s.work_id.hex()[:12], s.worker, verdict, reason)
        return 1
