"""What the explorer shows, as the models of dashboard/models.py: index queries plus a few live reads of the chain.

History (submissions, verdicts, checkpoints, slashes, claims) comes from the index; the values
the contracts compute (budget, reserved, a worker's bonded stake) are read live from the chain,
so the explorer never re-implements contract arithmetic. Amounts are decimal strings (uint256).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from pydantic import JsonValue
from web3 import Web3

from dashboard.chain_source import ComputePool, Deployment, StakeManager, ValidatorCourt, cid_to_digest, decode_pool
from dashboard.common import STATUSES, BadId, NotFound, address_of, page, reason_name, status_counts, work_id_of
from dashboard.court import PENALTY_WHY, VOID_WHY, CourtViews, credit_kind, nearest_rank
from dashboard.evidence import checks_passed, explain
from dashboard.models import (
    Backlog,
    Checkpoint,
    Claim,
    CourtAccount,
    CurvePoint,
    EvidenceAnswer,
    Latency,
    LivePool,
    LiveValidator,
    Manifest,
    Member,
    Page,
    Pool,
    PoolStats,
    PoolSummary,
    PoolValidator,
    PoolVerdict,
    PoolWorker,
    Slash,
    Submission,
    SubmissionCounts,
    Throughput,
    TimelineEntry,
    Trainer,
    TrainerPoint,
    Work,
    Worker,
    WorkerStake,
    given_fields,
)
from dashboard.store import Row, Store
from protocol.digest import hex_text

__all__ = ["BadId", "Explorer", "LiveChain", "NotFound", "STATUSES", "address_of", "page", "reason_name", "work_id_of"]

T = TypeVar("T")


class LiveChain:
    """Cached live reads (one second): pool state and stake, None while the RPC is unreachable."""

    def __init__(self, w3: Web3, deployment: Deployment, ttl_s: float = 1.0):
        self.pool = ComputePool(w3, deployment.compute_pool)
        self.stake = StakeManager(w3, deployment.stake_manager)
        self.court = ValidatorCourt(w3, deployment.validator_court) if deployment.validator_court else None
        self.w3 = w3
        self.ttl_s = ttl_s
        self._cache: dict[tuple[object, ...], tuple[float, object]] = {}
        self._lock = threading.Lock()

    def _cached(self, key: tuple[object, ...], read: Callable[[], T]) -> T | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit and time.monotonic() - hit[0] < self.ttl_s:
                return cast(T, hit[1])
        try:
            value = read()
        except Exception:  # outage: the page still shows the index
            return None
        with self._lock:
            self._cache[key] = (time.monotonic(), value)
        return value

    def head(self) -> int | None:
        return self._cached(("head",), lambda: self.w3.eth.block_number)

    def pool_state(self, pool_id: int) -> LivePool | None:
        def read() -> LivePool:
            s = decode_pool(pool_id, self.pool.get_pool(pool_id))
            return LivePool(owner=s.owner, trainer=s.trainer, status=s.status.name.lower(), latest_step=s.latest_step,
                            budget=str(s.budget), reserved=str(s.reserved), min_stake=str(s.min_stake),
                            reward_per_sample=str(s.reward_per_sample), slash_amount=str(s.slash_amount),
                            bounty_bps=s.bounty_bps, challenge_window_s=s.challenge_window_s,
                            reward_lock_s=s.reward_lock_s, async_level=s.async_level, task_ref=str(s.task_ref),
                            base_checkpoint=str(s.base_checkpoint), max_samples_per_work=s.max_samples_per_work,
                            spot_check_bps=s.spot_check_bps, active=s.active)
        return self._cached(("pool", pool_id), read)

    def now(self) -> int | None:
        """The chain's clock: the newest block's timestamp."""
        return self._cached(("now",), lambda: self.w3.eth.get_block("latest")["timestamp"])

    def block_hash(self, number: int) -> str | None:
        """The hash of block `number` (None if it does not exist yet or the RPC is down)."""
        def read() -> str | None:
            if number > self.w3.eth.block_number:
                return None
            return self.w3.eth.get_block(number)["hash"].to_0x_hex()
        return self._cached(("block", number), read)

    def member(self, pool_id: int, worker: str) -> Member | None:
        def read() -> Member:
            m = self.pool.get_member(pool_id, Web3.to_checksum_address(worker))
            return Member(member=m.member, next_nonce=m.next_nonce, open_works=m.open_works,
                          allocation=str(m.allocation), required=str(m.required))
        return self._cached(("member", pool_id, worker), read)

    def court_validator(self, pool_id: int, validator: str) -> LiveValidator | None:
        """`ValidatorCourt.getValidator`: locked and reserved stake (free = locked − reserved)."""
        court = self.court
        if court is None:
            return None
        def read() -> LiveValidator:
            v = court.get_validator(pool_id, Web3.to_checksum_address(validator))
            return LiveValidator(index=v.index, registered_at=v.registered_at, deregistered_at=v.deregistered_at,
                                 locked=str(v.locked), reserved=str(v.reserved), free=str(v.locked - v.reserved))
        return self._cached(("court_validator", pool_id, validator), read)

    def court_account(self, validator: str) -> CourtAccount | None:
        """A validator's court-wide figures: credits not yet withdrawn, stake the court holds locked, free stake."""
        court = self.court
        if court is None:
            return None
        def read() -> CourtAccount:
            address = Web3.to_checksum_address(validator)
            return CourtAccount(credits=str(court.credits(address)),
                                court_locked=str(self.stake.locked_of(court.address, address)),
                                bonded=str(self.stake.bonded_of(address)))
        return self._cached(("court_account", validator), read)

    def fee_budget(self, pool_id: int) -> str | None:
        court = self.court
        if court is None:
            return None
        return self._cached(("fee_budget", pool_id), lambda: str(court.fee_budget(pool_id)))

    def assigned(self, work_id: str) -> str | None:
        """`ValidatorCourt.assignedValidator` (zero: not drawn yet, none in the case's set, or past the horizon)."""
        court = self.court
        if court is None:
            return None
        return self._cached(("assigned", work_id), lambda: court.assigned_validator(bytes.fromhex(work_id[2:])))

    def stake_of(self, worker: str) -> WorkerStake | None:
        def read() -> WorkerStake:
            address = Web3.to_checksum_address(worker)
            unbonding = self.stake.unbonding_of(address)
            return WorkerStake(bonded=str(self.stake.bonded_of(address)),  # free bonded stake
                               allocated=str(self.stake.locked_of(self.pool.address, address)),  # locked for pools
                               unbonding=str(unbonding.amount), unbonding_ready_at=unbonding.ready_at)
        return self._cached(("stake", worker), read)


CURVE_FIELDS = tuple(name for name in CurvePoint.model_fields if name not in ("step", "metrics_cid"))
"""The metrics every curve point carries (None when the trainer did not publish them); other numbers pass."""


def _number(value: object) -> int | float | None:
    """A metric as the curve shows it: a JSON number, else None (a metrics object is the trainer's, not ours)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _histogram_sum(histogram: object) -> int | None:
    """The groups a step trained on, from its staleness histogram ({staleness: groups}); None if not one."""
    if not isinstance(histogram, dict):
        return None
    counts = [v for v in histogram.values() if isinstance(v, int) and not isinstance(v, bool)]
    return sum(counts) if len(counts) == len(histogram) else None


def _no_reward(p: CurvePoint, groups: int | None) -> str | None:
    """Why a step has no reward. The trainer's reward is the mean over the rollouts of the files taken in since the
    previous step (trainer/loop.py), counted even when all their groups are dropped (stale, zero-advantage); a step
    without one took in no file, or only files it refused, and trained on groups buffered from earlier files."""
    if p.reward is not None:
        return None
    batch = f"{groups} groups" if groups is not None else "groups"
    reward = f" (their mean reward {p.batch_reward:.3f})" if p.batch_reward is not None else ""
    earlier = f"it trained on {batch} buffered from earlier files{reward}, so their staleness grows with each such step"
    if p.files_consumed == 0:
        return f"no file taken in since the previous step: {earlier}"
    if p.files_consumed and p.rejected_files == p.files_consumed:
        return f"every file taken in was refused (sampling settings not the pool's): {earlier}"
    return "the trainer published no reward for this step"


class _VerdictsByBlock:
    """How many events `name` (WorkAccepted, WorkChallenged) of a pool the index held by each of `blocks`: the
    `verdict_blocks` rows between consecutive blocks added up in SQL (each interval one range of its index), then
    summed in order; `total`: all of them (`event_counts`)."""

    def __init__(self, store: Store, pool_id: int, name: str, blocks: list[int]):
        ordered = sorted(set(blocks))
        intervals = json.dumps([[lo, hi] for lo, hi in zip([-1, *ordered], ordered, strict=False)])
        self.by_block: dict[int, int] = {}
        running = 0
        for r in store.db.execute(
                "SELECT j.value ->> '$[1]' AS block, (SELECT COALESCE(SUM(v.n), 0) FROM verdict_blocks v "
                "WHERE v.pool_id = ? AND v.name = ? AND v.block_number > (j.value ->> '$[0]') "
                "AND v.block_number <= (j.value ->> '$[1]')) AS n FROM json_each(?) j ORDER BY j.key",
                (pool_id, name, intervals)):
            running += r[1]
            self.by_block[r[0]] = running
        self.total = store.scalar("SELECT COALESCE(SUM(n), 0) FROM event_counts WHERE name = ? AND pool_id = ?",
                                  (name, pool_id))

    def up_to(self, block: int) -> int:
        return self.by_block[block]


@dataclass
class _Membership:
    """A worker that joined the pool; `member`: whether it still is."""

    worker: str
    joined_block: int
    member: bool = True
    ejected: bool = False


@dataclass(frozen=True)
class _Allowed:
    """The latest `ValidatorSet` of a validator in a pool."""

    validator: str
    allowed: bool


class Explorer(CourtViews):
    """The explorer's read model over one index and one chain (the court's views: dashboard/court.py)."""

    def __init__(self, store: Store, live: LiveChain):
        self.store = store
        self.live = live

    # -------------------------------------------------------------- pools

    def _pool_row(self, pool_id: int) -> Row:
        rows = self.store.select("SELECT * FROM events WHERE name = 'PoolCreated' AND pool_id = ?", (pool_id,))
        if not rows:
            raise NotFound(f"unknown pool {pool_id}")
        return rows[0]

    def pools(self, offset: int, limit: int) -> Page[PoolSummary]:
        total = self.store.scalar("SELECT COUNT(*) FROM events WHERE name = 'PoolCreated'")
        rows = self.store.select("SELECT * FROM events WHERE name = 'PoolCreated' ORDER BY pool_id LIMIT ? OFFSET ?",
                                 (limit, offset))
        return page(PoolSummary, [self._pool_summary(r) for r in rows], total, offset, limit)

    def _pool_summary(self, row: Row) -> PoolSummary:
        pool_id = row["pool_id"]
        return PoolSummary(pool_id=pool_id, owner=row["data"]["owner"], trainer=row["data"]["trainer"],
                           task_ref=row["data"]["task_ref"], created_block=row["block_number"],
                           latest_checkpoint_step=self._latest_step(pool_id), submissions=status_counts(self.store.select(
                               "SELECT status, SUM(n) AS n FROM work_counts WHERE pool_id = ? GROUP BY status",
                               (pool_id,))),
                           workers=sum(m.member for m in self._members(pool_id).values()),
                           state=self.live.pool_state(pool_id))

    def _latest_step(self, pool_id: int) -> int | None:
        """The newest checkpoint's step (None before the first)."""
        return self.store.scalar("SELECT MAX(json_extract(data, '$.step')) FROM events "
                                 "WHERE name = 'CheckpointPublished' AND pool_id = ?", (pool_id,))

    def pool(self, pool_id: int) -> Pool:
        summary = self._pool_summary(self._pool_row(pool_id))
        spec = self.store.object(summary.task_ref)
        return Pool(**given_fields(summary), run_spec=spec.body if spec else None,
                    slashed_total=str(sum(self._slashed_by_worker(pool_id).values())),
                    validators=[v.validator for v in self._validators(pool_id) if v.allowed],
                    court=self._court_params(pool_id) is not None)

    def _min_checked_tokens(self, pool_id: int) -> int:
        """The floor of checked tokens a file that the pool's run spec states (0 where it states none, or the spec
        is not a readable run spec)."""
        spec = self.store.object(self._pool_row(pool_id)["data"]["task_ref"])  # the summary's task_ref, unsummarised
        body = spec.body if spec else None
        verification = body.get("verification") if isinstance(body, dict) else None
        floor = verification.get("min_checked_tokens") if isinstance(verification, dict) else None
        return floor if isinstance(floor, int) and not isinstance(floor, bool) and floor > 0 else 0

    def pool_stats(self, pool_id: int) -> PoolStats:
        """What a pool owner watches: budget, fee budget and reserved rewards (live), throughput, verdict and
        finality latency (p50/p99 from block times), backlog, the share of judged work that was rejected,
        disputes and money out (rewards claimed, fees paid, slashes)."""
        self._pool_row(pool_id)
        court = self.court(pool_id) if self._court_params(pool_id) is not None else None
        counts = {s: 0 for s in STATUSES}
        samples_by = dict.fromkeys(STATUSES, 0)
        for r in self.store.select("SELECT status, SUM(n) AS n, SUM(samples) AS samples FROM work_counts "
                                   "WHERE pool_id = ? GROUP BY status", (pool_id,)):
            counts[r["status"]], samples_by[r["status"]] = r["n"], r["samples"]
        submissions = sum(counts.values())
        first, last = (self.store.scalar(f"SELECT {end}(block_time) FROM works WHERE pool_id = ?", (pool_id,))
                       for end in ("MIN", "MAX"))
        judged = counts["accepted"] + counts["paid"] + counts["rejected"]
        span = last - first if submissions > 1 else 0
        per_min = lambda x: None if span <= 0 else round(60.0 * x / span, 3)  # noqa: E731
        samples = sum(samples_by.values())
        accepted_samples = samples_by["accepted"] + samples_by["paid"]
        state = self.live.pool_state(pool_id)
        paid_samples = samples_by["paid"]
        # a pending work has no WorkAccepted or WorkChallenged: all of them await the pool's verdict
        backlog = Backlog(awaiting_verdict=counts["pending"], awaiting_finality=counts["pending"])
        if court:
            backlog = Backlog(awaiting_verdict=court.cases.pending,
                              awaiting_finality=court.cases.verdict + court.cases.disputed)
        out = PoolStats(
            pool_id=pool_id, budget=state.budget if state else None, reserved=state.reserved if state else None,
            fee_budget=self.live.fee_budget(pool_id) if court else None,
            submissions=submissions, samples=samples, accepted_samples=accepted_samples, span_s=span,
            throughput=Throughput(submissions_per_min=per_min(submissions), samples_per_min=per_min(samples),
                                  accepted_samples_per_min=per_min(accepted_samples)),
            verdict_latency_s=self._latency(pool_id, "given" if court else "decided"),
            finality_latency_s=self._latency(pool_id, "decided"),
            backlog=backlog,
            status=SubmissionCounts(**counts),
            adversary_rate=None if judged == 0 else round(counts["rejected"] / judged, 4),
            rewards_paid=None if state is None else str(paid_samples * int(state.reward_per_sample)),
            slashed_total=str(sum(self._slashed_by_worker(pool_id).values())),
        )
        if court:  # a court pool's figures (absent from another pool's answer)
            out.cases, out.disputes = court.cases, court.disputes
            out.fees_paid, out.validator_penalties = court.fees_paid, court.penalties_total
        return out

    def _latency(self, pool_id: int, kind: str) -> Latency:
        """Seconds from submission to a work's first verdict (`kind` given: VerdictGiven; decided: WorkAccepted or
        WorkChallenged) over the pool's works that have one: nearest-rank percentiles from the kept histogram."""
        histogram = [(r["seconds"], r["n"]) for r in self.store.select(
            "SELECT seconds, n FROM latencies WHERE pool_id = ? AND kind = ? AND n > 0 ORDER BY seconds", (pool_id, kind))]
        n = sum(count for _, count in histogram)
        def rank(q: int) -> int | None:  # the value at the nearest rank, as court.percentile picks it
            at, seen = nearest_rank(n, q), 0
            for seconds, count in histogram:
                seen += count
                if seen >= at:
                    return seconds
            return None
        return Latency(n=n, p50=rank(50), p99=rank(99))

    def trainer(self, pool_id: int) -> Trainer:
        """The trainer's view: the learning curve (reward, held-out accuracy, staleness, importance-sampling
        statistics) with what it consumed next to what the pool accepted by each checkpoint."""
        row = self._pool_row(pool_id)
        curve = self._curve(pool_id)  # a checkpoint per step: the contract publishes each step once
        blocks = [checkpoint.block for checkpoint, _, _ in curve]
        by_then = {name: _VerdictsByBlock(self.store, pool_id, name, blocks)
                   for name in ("WorkAccepted", "WorkChallenged")}
        consumed: int | float = 0
        points = []
        for checkpoint, p, metrics in curve:
            consumed += p.files_consumed or 0
            block = checkpoint.block
            groups = _histogram_sum(metrics.get("staleness_histogram"))
            points.append(TrainerPoint(
                **given_fields(p), consumed_total=consumed, batch_groups=groups, no_reward=_no_reward(p, groups),
                accepted_by_then=by_then["WorkAccepted"].up_to(block),
                rejected_by_then=by_then["WorkChallenged"].up_to(block)))
        return Trainer(pool_id=pool_id, trainer=row["data"]["trainer"], points=points,
                       latest_step=self._latest_step(pool_id), consumed_total=consumed,
                       accepted_total=by_then["WorkAccepted"].total, rejected_total=by_then["WorkChallenged"].total)

    def checkpoints(self, pool_id: int, offset: int, limit: int) -> Page[Checkpoint]:
        self._pool_row(pool_id)
        where = "FROM events WHERE name = 'CheckpointPublished' AND pool_id = ?"
        total = self.store.scalar(f"SELECT COUNT(*) {where}", (pool_id,))
        rows = self.store.select(f"SELECT * {where} ORDER BY json_extract(data, '$.step') LIMIT ? OFFSET ?",
                                 (pool_id, limit, offset))
        manifests = self.store.objects([r["data"]["manifest_digest"] for r in rows])
        items = []
        for r in rows:
            manifest = manifests.get(r["data"]["manifest_digest"])
            body = manifest.body if manifest else None  # what the fetcher kept of a manifest it validated
            items.append(Checkpoint(step=r["data"]["step"], manifest_digest=r["data"]["manifest_digest"],
                                    block=r["block_number"], tx_hash=r["tx_hash"],
                                    manifest=None if body is None else Manifest.model_validate(body),
                                    manifest_error=manifest.error if manifest else None))
        return page(Checkpoint, items, total, offset, limit)

    def curve(self, pool_id: int, offset: int, limit: int) -> Page[CurvePoint]:
        """Per-step metrics the trainer put on IPFS, one point per checkpoint whose manifest names them."""
        points = [point for _, point, _ in self._curve(pool_id)]
        return page(CurvePoint, points[offset:offset + limit], len(points), offset, limit)

    def _curve(self, pool_id: int) -> list[tuple[Checkpoint, CurvePoint, dict[str, JsonValue]]]:
        """Each checkpoint whose manifest names metrics the IPFS cache holds, with its curve point and the metrics."""
        named_metrics = [(c, c.manifest.metrics) for c in self.checkpoints(pool_id, 0, 1_000_000).items
                         if c.manifest and c.manifest.metrics]
        digests = {cid: hex_text(cid_to_digest(cid)) for _, cid in named_metrics}
        objects = self.store.objects(list(digests.values()))
        out = []
        for c, metrics_cid in named_metrics:
            obj = objects.get(digests[metrics_cid])
            m = obj.body if obj else None  # the trainer's JSON: only its numbers are shown
            if not isinstance(m, dict):
                continue
            named = {k: _number(m.get(k)) for k in CURVE_FIELDS}
            others = {k: v for k, v in m.items() if k not in named and k not in ("step", "metrics_cid")
                      and _number(v) is not None}
            out.append((c, CurvePoint(**named, **others, step=c.step, metrics_cid=metrics_cid), m))
        return out

    def _members(self, pool_id: int) -> dict[str, _Membership]:
        """Every worker that ever joined the pool; `member` says whether it still is."""
        members: dict[str, _Membership] = {}
        for r in self.store.select("SELECT worker, name, block_number, json_extract(data, '$.worker') AS address "
                                   "FROM events WHERE pool_id = ? AND name IN ('WorkerJoined', 'WorkerLeft', "
                                   "'WorkerEjected') ORDER BY block_number, log_index", (pool_id,)):
            entry = members.setdefault(r["worker"], _Membership(r["address"], r["block_number"]))
            entry.member = r["name"] == "WorkerJoined"
            entry.ejected = r["name"] == "WorkerEjected"
        return members

    def workers(self, pool_id: int, offset: int, limit: int) -> Page[PoolWorker]:
        self._pool_row(pool_id)
        members = sorted(self._members(pool_id).items(), key=lambda kv: kv[1].joined_block)
        shown = members[offset:offset + limit]
        rows: dict[str, list[Row]] = {}
        for r in self.store.select("SELECT worker, status, SUM(n) AS n FROM work_counts WHERE pool_id = ? "
                                   "AND worker IN (SELECT value FROM json_each(?)) GROUP BY worker, status",
                                   (pool_id, json.dumps([w for w, _ in shown]))):
            rows.setdefault(r["worker"], []).append(r)
        slashed = self._slashed_by_worker(pool_id)
        items = [PoolWorker(worker=m.worker, joined_block=m.joined_block, member=m.member, ejected=m.ejected,
                            submissions=status_counts(rows.get(w, [])), slashed=str(slashed.get(w, 0)))
                 for w, m in shown]
        return page(PoolWorker, items, len(members), offset, limit)

    def _validators(self, pool_id: int) -> list[_Allowed]:
        latest: dict[str, _Allowed] = {}
        for r in self.store.select("SELECT * FROM events WHERE pool_id = ? AND name = 'ValidatorSet' "
                                   "ORDER BY block_number, log_index", (pool_id,)):
            latest[r["data"]["validator"].lower()] = _Allowed(r["data"]["validator"], r["data"]["allowed"])
        return list(latest.values())

    def validators(self, pool_id: int, offset: int, limit: int) -> Page[PoolValidator]:
        self._pool_row(pool_id)
        verdicts = {(r["v"], r["name"]): r["n"] for r in self.store.select(  # a verdict's party: its validator
            "SELECT party AS v, name, SUM(n) AS n FROM event_counts WHERE pool_id = ? "
            "AND name IN ('WorkAccepted', 'WorkChallenged') GROUP BY v, name", (pool_id,))}
        items = [PoolValidator(validator=v.validator, allowed=v.allowed,
                               attested=verdicts.get((v.validator.lower(), "WorkAccepted"), 0),
                               challenged=verdicts.get((v.validator.lower(), "WorkChallenged"), 0))
                 for v in self._validators(pool_id)]
        return page(PoolValidator, items[offset:offset + limit], len(items), offset, limit)

    # -------------------------------------------------------------- submissions and verdicts

    def _submission(self, r: Row) -> Submission:
        verdict = self.store.select("SELECT * FROM events WHERE work_id = ? AND name IN ('WorkAccepted', "
                                    "'WorkChallenged') ORDER BY block_number DESC LIMIT 1", (r["work_id"],))
        out = Submission(work_id=r["work_id"], pool_id=r["pool_id"], worker=r["data"]["worker"],
                         step=r["data"]["step"], n_samples=r["data"]["n_samples"], status=r["status"],
                         block=r["block_number"], time=r.get("block_time"), tx_hash=r["tx_hash"], reason=None,
                         evidence_digest=None, validator=None, case_state=None, judge=None)
        if verdict:
            v = verdict[0]["data"]
            out.validator = v["validator"]
            if verdict[0]["name"] == "WorkChallenged":
                out.reason = reason_name(v["reason_code"])
                out.evidence_digest = v["evidence_digest"]
                out.slashed = v["slashed"]  # only a rejected work's answer has it
        case = self.store.select("SELECT state FROM court_cases WHERE work_id = ?", (r["work_id"],))
        if case:  # a court pool: the validator that judged (the pool only sees the court), and the case's state
            out.case_state = case[0]["state"]
            # the first verdict's judge: a VerdictFinal names whose verdict stood, the disputer's when overturned
            given = self.store.select("SELECT data FROM events WHERE work_id = ? AND name = 'VerdictGiven' "
                                      "ORDER BY block_number, log_index LIMIT 1", (r["work_id"],)) or \
                self.store.select("SELECT data FROM events WHERE work_id = ? AND name = 'VerdictFinal' "
                                  "ORDER BY block_number, log_index LIMIT 1", (r["work_id"],))
            if given:
                out.judge = given[0]["data"]["judge"]
            if out.reason == "DISPUTE":  # the challenge a committee decided: its evidence is the dispute's
                disputed = self.store.select("SELECT data FROM events WHERE work_id = ? AND name = 'Disputed' "
                                             "ORDER BY block_number DESC LIMIT 1", (r["work_id"],))
                if disputed:
                    out.evidence_digest = disputed[0]["data"]["evidence_digest"]
            elif out.evidence_digest is None and out.status == "pending":
                first = self.store.select("SELECT data FROM events WHERE work_id = ? AND name = 'VerdictGiven'",
                                          (r["work_id"],))
                if first and not first[0]["data"]["accepted"]:  # challenged, not final yet
                    out.reason = reason_name(first[0]["data"]["reason_code"])
                    out.evidence_digest = first[0]["data"]["evidence_digest"]
        return out

    def submissions(self, pool_id: int, status: str | None, offset: int, limit: int) -> Page[Submission]:
        self._pool_row(pool_id)
        where, params = "pool_id = ?", [pool_id]
        if status:
            where, params = where + " AND status = ?", params + [status]
        total = self.store.scalar(f"SELECT COALESCE(SUM(n), 0) FROM work_counts WHERE {where}", tuple(params))
        rows = self.store.newest_works("work_status", where, tuple(params), offset, limit)
        return page(Submission, [self._submission(r) for r in rows], total, offset, limit)

    def verdicts(self, pool_id: int, offset: int, limit: int) -> Page[PoolVerdict]:
        self._pool_row(pool_id)
        total, rows = self.store.newest_of_names(pool_id, ("WorkAccepted", "WorkChallenged"), offset, limit)
        items = []
        for r in rows:
            d = r["data"]
            challenged = r["name"] == "WorkChallenged"
            items.append(PoolVerdict(work_id=r["work_id"], verdict="challenged" if challenged else "accepted",
                                     validator=d["validator"], block=r["block_number"], tx_hash=r["tx_hash"],
                                     reason=reason_name(d["reason_code"]) if challenged else None,
                                     reason_code=d.get("reason_code"), evidence_digest=d.get("evidence_digest"),
                                     slashed=d.get("slashed")))
        return page(PoolVerdict, items, total, offset, limit)

    # Slashed comes from the StakeManager, which knows no pools: the challenge in the same transaction names
    # the pool and the worker (a court resolution slashes the overturned judge in the same transaction: the
    # ComputePool's slash of the worker is the one whose slasher is the pool).
    # (each Slashed row, then its transaction's challenge by tx_hash: CROSS JOIN keeps that order and `+` keeps the
    # pool's index of challenges out of the lookup)
    _SLASHES = ("FROM events s CROSS JOIN events c ON c.tx_hash = s.tx_hash AND +c.name = 'WorkChallenged' "
                "AND +c.pool_id = ? WHERE s.name = 'Slashed' AND lower(json_extract(s.data, '$.slasher')) = ?")

    # the same pairs from the pool's challenges (events_by_pool), each then its transaction's slashes: for a pool with
    # few of the slashes, where walking every slash newest first until a page is full would read them all
    _SLASHES_BY_CHALLENGE = ("FROM events c CROSS JOIN events s ON s.tx_hash = c.tx_hash AND s.name = 'Slashed' "
                             "WHERE c.pool_id = ? AND c.name = 'WorkChallenged' "
                             "AND lower(json_extract(s.data, '$.slasher')) = ?")

    def _slash_rows(self, pool_id: int, worker: str | None = None, offset: int = 0, limit: int = -1,
                    total: int | None = None) -> list[Row]:
        """Slashes of the pool's workers (of `worker` only, when given), newest first, `limit` of them (-1: all)
        from `offset` (`total`: how many the pool has, when the caller knows it)."""
        params = (pool_id, self.live.pool.address.lower(), *((worker,) if worker else ()), limit, offset)
        everyone = self.store.scalar("SELECT COALESCE(SUM(n), 0) FROM event_counts WHERE name = 'Slashed'")
        source = self._SLASHES_BY_CHALLENGE if total is not None and 4 * total < everyone else self._SLASHES
        return self.store.select(
            "SELECT s.*, c.work_id AS challenged_work, json_extract(c.data, '$.reason_code') AS reason_code, "
            f"json_extract(c.data, '$.evidence_digest') AS evidence_digest {source} "
            f"{'AND s.worker = ? ' if worker else ''}ORDER BY s.block_number DESC, s.log_index DESC LIMIT ? OFFSET ?",
            params)

    def _slashed_by_worker(self, pool_id: int) -> dict[str, int]:
        """Amounts slashed from the pool's workers, by worker (kept in `slash_sums` as the rows are written)."""
        return {r["worker"]: int(r["amount"]) for r in self.store.select(
            "SELECT worker, amount FROM slash_sums WHERE pool_id = ? AND slasher = ? AND n > 0",
            (pool_id, self.live.pool.address.lower()))}

    def _slash_item(self, r: Row) -> Slash:
        sub = self._submission(self.store.select("SELECT * FROM work_status WHERE work_id = ?",
                                                 (r["challenged_work"],))[0])
        return Slash(worker=r["data"]["worker"], challenger=r["data"]["challenger"], amount=r["data"]["amount"],
                     bounty=r["data"]["bounty"], block=r["block_number"], time=r["block_time"],
                     tx_hash=r["tx_hash"], work_id=r["challenged_work"], pool_id=sub.pool_id,
                     reason=sub.reason, evidence_digest=sub.evidence_digest, judge=sub.judge)

    def slashes(self, pool_id: int, offset: int, limit: int) -> Page[Slash]:
        self._pool_row(pool_id)
        total = self.store.scalar("SELECT COALESCE(SUM(n), 0) FROM slash_sums WHERE pool_id = ? AND slasher = ?",
                                  (pool_id, self.live.pool.address.lower()))
        rows = self._slash_rows(pool_id, offset=offset, limit=limit, total=total)
        return page(Slash, [self._slash_item(r) for r in rows], total, offset, limit)

    def claims(self, pool_id: int, offset: int, limit: int) -> Page[Claim]:
        self._pool_row(pool_id)
        # newest claims first (events_by_name), each kept if it paid a work of the pool (claim_pools by key): a page
        # reads its claims only
        source = ("FROM events WHERE name = 'RewardsClaimed' AND EXISTS (SELECT 1 FROM claim_pools p "
                  "WHERE p.tx_hash = events.tx_hash AND p.pool_id = ? AND p.n > 0)")
        total = self.store.scalar("SELECT COUNT(*) FROM claim_pools WHERE pool_id = ? AND n > 0", (pool_id,))
        total, rows = self.store.newest_first(source, (pool_id,), offset, limit, total)
        items = [Claim(worker=r["data"]["worker"], amount=r["data"]["amount"], works=len(r["data"]["work_ids"]),
                       work_ids=r["data"]["work_ids"], block=r["block_number"], time=r["block_time"],
                       tx_hash=r["tx_hash"])
                 for r in rows]
        return page(Claim, items, total, offset, limit)

    # -------------------------------------------------------------- workers and works

    def worker(self, address: str) -> Worker:
        """A worker: stake (free, per pool allocation, unbonding: live), submissions by verdict, open works,
        rewards owed (accepted, unpaid), claimable (their reward lock has passed) and claimed, and every slash
        with the reason and evidence of the challenge that took it."""
        worker = address_of(address)
        if not self.store.scalar("SELECT 1 FROM events WHERE worker = ? LIMIT 1", (worker,)):
            raise NotFound(f"unknown worker {address}")
        by_status = status_counts(self.store.select(
            "SELECT status, SUM(n) AS n FROM work_counts WHERE worker = ? GROUP BY status", (worker,)))
        owed = claimable = 0
        now = self.live.now()
        for r in self.store.select("SELECT pool_id, block_time, json_extract(data, '$.n_samples') AS samples "
                                   "FROM work_status WHERE worker = ? AND status = 'accepted'", (worker,)):
            state = self.live.pool_state(r["pool_id"])
            if state is not None:
                reward = int(r["samples"]) * int(state.reward_per_sample)
                owed += reward
                if now is not None and now >= r["block_time"] + state.reward_lock_s:
                    claimable += reward
        claimed = sum(int(r["data"]["amount"]) for r in self.store.select(
            "SELECT data FROM events WHERE name = 'RewardsClaimed' AND worker = ?", (worker,)))
        pools = [r["pool_id"] for r in self.store.select(
            "SELECT DISTINCT pool_id FROM events WHERE worker = ? AND name = 'WorkerJoined' ORDER BY pool_id", (worker,))]
        slashes = [self._slash_item(r) for p in pools for r in self._slash_rows(p, worker)]
        open_works = [self._submission(r) for r in self.store.select(
            "SELECT * FROM work_status WHERE worker = ? AND status IN ('pending', 'accepted') "
            "ORDER BY block_number DESC, log_index DESC LIMIT 100", (worker,))]
        return Worker(worker=Web3.to_checksum_address(worker), pools=pools, stake=self.live.stake_of(worker),
                      members={str(p): self.live.member(p, worker) for p in pools},
                      submissions=by_status, owed=str(owed), claimable=str(claimable), claimed=str(claimed),
                      slashed=str(sum(int(x.amount) for x in slashes)), slashes=slashes, open_works=open_works)

    def worker_submissions(self, address: str, status: str | None, offset: int, limit: int) -> Page[Submission]:
        self.worker(address)
        where, params = "worker = ?", [address_of(address)]
        if status:
            where, params = where + " AND status = ?", params + [status]
        total = self.store.scalar(f"SELECT COALESCE(SUM(n), 0) FROM work_counts WHERE {where}", tuple(params))
        rows = self.store.newest_works("work_status", where, tuple(params), offset, limit)
        return page(Submission, [self._submission(r) for r in rows], total, offset, limit)

    def work(self, work_id: str) -> Work:
        """A submission with its verdict, the reason readable (the evidence document explained, or for an
        accepted work the checks it passed and the completions they ran on), its court case and its timeline."""
        wid = work_id_of(work_id)
        rows = self.store.select("SELECT * FROM work_status WHERE work_id = ?", (wid,))
        if not rows:
            raise NotFound(f"unknown work {work_id}")
        sub = self._submission(rows[0])
        evidence = self.evidence(sub.evidence_digest) if sub.evidence_digest else None
        state = self.live.pool_state(sub.pool_id)
        checks = None
        if sub.status in ("accepted", "paid") and state is not None:
            checks = checks_passed(sub.n_samples, state.spot_check_bps, wid, self.live.block_hash(sub.block + 1),
                                   sub.block, self._min_checked_tokens(sub.pool_id))
        out = Work(**given_fields(sub), evidence=evidence,
                   explanation=explain(evidence.document, wid) if evidence and evidence.document is not None else None,
                   checks=checks, timeline=self.timeline(wid))
        if sub.case_state is not None:  # a court pool's work: its case, each dispute's own evidence explained
            case = self.case(wid)
            for d in case.disputes:
                ev = self.store.object(d.evidence_digest)
                d.evidence = None if ev is None or ev.body is None else explain(ev.body, wid)
            out.case = case
        return out

    def timeline(self, work_id: str) -> list[TimelineEntry]:
        """Every event of a work from its submission to its payment, slash or expiry, in chain order, each
        with who acted and what it means."""
        wid = work_id_of(work_id)
        rows = self.store.select("SELECT * FROM events WHERE work_id = ? ORDER BY block_number, log_index", (wid,))
        if not rows:
            raise NotFound(f"unknown work {work_id}")
        sub = next((r for r in rows if r["name"] == "WorkSubmitted"), rows[0])
        challenged = [r["tx_hash"] for r in rows if r["name"] == "WorkChallenged"]
        pool = self.live.pool.address.lower()
        extra = [r for tx in challenged for r in self.store.select(
            "SELECT * FROM events WHERE tx_hash = ? AND name = 'Slashed'", (tx,))
            if r["data"]["slasher"].lower() == pool]
        extra += self.store.select("SELECT e.* FROM claimed_works c CROSS JOIN events e ON e.tx_hash = c.tx_hash AND "
                                   "+e.name = 'RewardsClaimed' WHERE c.work_id = ?", (wid,))
        txs = self._tx_rows({r["tx_hash"] for r in rows if r["name"] == "Credited"})
        return [TimelineEntry(event=r["name"], block=r["block_number"], time=r["block_time"],
                              after_s=r["block_time"] - sub["block_time"], tx_hash=r["tx_hash"],
                              who=r["party"] or r["worker"], text=describe(r, txs))
                for r in sorted(rows + extra, key=lambda r: (r["block_number"], r["log_index"]))]

    def evidence(self, digest: str) -> EvidenceAnswer:
        """A challenge's (or a dispute's) evidence document as the validator put it on IPFS (fetched by the
        indexer), and what it says, explained."""
        d = work_id_of(digest)  # same shape: 0x + 32 bytes
        obj = self.store.object(d)
        if obj is None or obj.kind != "evidence":
            raise NotFound(f"no challenge names evidence {digest}")
        body = obj.body  # anyone's JSON: served as it is, explained by what evidence.explain recognises in it
        work = body.get("work_id") if isinstance(body, dict) else None
        return EvidenceAnswer(digest=d, document=body, available=body is not None, error=obj.error,
                              explanation=None if body is None else explain(body, work if isinstance(work, str)
                                                                            else None))


def _tokens(amount: str | int) -> str:
    value = int(amount)
    return f"{value // 10**18}.{value % 10**18 * 10**4 // 10**18:04d}"


def describe(r: Row, txs: dict[str, list[Row]]) -> str:
    """One line for a timeline entry."""
    d, name = r["data"], r["name"]
    if name == "WorkSubmitted":
        return f"{d['worker']} submitted {d['n_samples']} samples for step {d['step']} (nonce {d['nonce']})"
    if name == "AssignmentDrawn":
        return f"assigned to {d['validator']}"
    if name == "VerdictGiven":
        what = "attested" if d["accepted"] else f"challenged it ({reason_name(d['reason_code'])})"
        return f"{d['judge']} {what}: the first verdict"
    if name == "Disputed":
        return f"{d['disputer']} disputed the verdict, locking its dispute bond"
    if name == "CommitteeDrawn":
        return f"committee drawn: {', '.join(d['committee'])}"
    if name == "VoteCommitted":
        return f"{d['voter']} committed a vote"
    if name == "VoteRevealed":
        return f"{d['voter']} revealed: work {'valid' if d['work_valid'] else 'invalid'}"
    if name == "DisputeResolved":
        verdict = "overturned" if d["overturned"] else "upheld"
        return f"dispute resolved {d['votes_valid']}–{d['votes_invalid']} (valid–invalid): the verdict is {verdict}"
    if name == "ValidatorPenalized":
        return f"{d['party']} lost {_tokens(d['amount'])} ({PENALTY_WHY.get(d['why'], d['why'])})"
    if name == "Credited":
        return f"{d['to']} credited {_tokens(d['amount'])} ({credit_kind(r, txs.get(r['tx_hash'], [r]))})"
    if name == "VerdictFinal":
        return (f"final: {'accepted' if d['accepted'] else 'challenged'}; verdict fee {_tokens(d['fee'])} "
                f"to {d['judge']}")
    if name == "CaseVoided":
        return f"case void: {VOID_WHY.get(d['why'], d['why'])}"
    if name == "WorkAccepted":
        return "accepted in the pool: its reward is owed to the worker"
    if name == "WorkChallenged":
        return f"rejected in the pool ({reason_name(d['reason_code'])}): the worker is slashed {_tokens(d['slashed'])}"
    if name == "Slashed":
        return f"{d['worker']} slashed {_tokens(d['amount'])}, bounty {_tokens(d['bounty'])} to {d['challenger']}"
    if name == "WorkExpired":
        return "expired: nobody's verdict reached the pool in its challenge window; the reward went back"
    if name == "RewardsClaimed":
        return f"paid: {d['worker']} claimed {_tokens(d['amount'])} for {len(d.get('work_ids', []))} works"
    return name
