"""The explorer's HTTP face: JSON API (OpenAPI at /docs), Prometheus /metrics and the web page.

Every JSON route answers one model of dashboard/models.py (its `response_model`, from the route's return type),
so /openapi.json documents each answer. Every list is paginated (`offset`, `limit`; answers carry `total`).
Unknown pools, workers, works and evidence answer 404 with `{"error": "..."}`; malformed ids 400, bad query
values 422.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from pydantic import JsonValue

from dashboard.court import PENALTY_WHY
from dashboard.indexer import ChainIndexer, ObjectFetcher
from dashboard.models import (
    CaseStateName,
    CaseSummary,
    Checkpoint,
    Claim,
    Court,
    CourtCase,
    CourtValidator,
    CurvePoint,
    ErrorAnswer,
    EvidenceAnswer,
    Page,
    Pool,
    PoolStats,
    PoolSummary,
    PoolValidator,
    PoolVerdict,
    PoolWorker,
    Slash,
    Status,
    StatusAnswer,
    Submission,
    TimelineEntry,
    Trainer,
    Validator,
    ValidatorEarnings,
    ValidatorVerdict,
    Work,
    Worker,
)
from dashboard.views import BadId, Explorer, NotFound

STATIC = Path(__file__).resolve().parent / "static"
Offset = Query(0, ge=0, description="items to skip")
Limit = Query(50, ge=1, le=500, description="items per page (at most 500)")
ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": ErrorAnswer, "description": "a malformed id"},
    404: {"model": ErrorAnswer, "description": "an unknown pool, worker, validator, work, case or evidence"},
    422: {"model": ErrorAnswer, "description": "a bad query value"},
}


class IndexMetrics:
    """Prometheus collector: read from the index at each scrape, so it is never out of step (the counts the index
    keeps as it writes rows, dashboard/store.py, so a scrape reads a few hundred rows at any history)."""

    def __init__(self, explorer: Callable[[], Explorer], indexer: ChainIndexer | None, fetcher: ObjectFetcher | None):
        self.explorer = explorer
        self.indexer = indexer
        self.fetcher = fetcher

    def collect(self):
        store = self.explorer().store
        events = GaugeMetricFamily("proofswarm_explorer_events", "chain events in the index", labels=["event"])
        for name, n in sorted(store.count_events().items()):
            events.add_metric([name], n)
        yield events
        works = GaugeMetricFamily("proofswarm_explorer_submissions", "submissions by status", labels=["pool", "status"])
        for r in store.select("SELECT pool_id, status, SUM(n) AS n FROM work_counts GROUP BY pool_id, status "
                              "HAVING SUM(n) > 0"):
            works.add_metric([str(r["pool_id"]), r["status"]], r["n"])
        yield works
        cases = GaugeMetricFamily("proofswarm_explorer_court_cases", "court cases by state", labels=["pool", "state"])
        for r in store.select("SELECT pool_id, state, SUM(n) AS n FROM work_counts WHERE state != '' "
                              "GROUP BY pool_id, state HAVING SUM(n) > 0"):
            cases.add_metric([str(r["pool_id"]), r["state"]], r["n"])
        yield cases
        penalties = GaugeMetricFamily("proofswarm_explorer_validator_penalties", "validator penalties by reason",
                                      labels=["pool", "why"])
        for r in store.select("SELECT pool_id, json_extract(data, '$.why') AS why, COUNT(*) AS n FROM events "
                              "WHERE name = 'ValidatorPenalized' GROUP BY pool_id, why"):
            penalties.add_metric([str(r["pool_id"]), PENALTY_WHY.get(r["why"], str(r["why"]))], r["n"])
        yield penalties
        steps = GaugeMetricFamily("proofswarm_explorer_checkpoint_step", "newest checkpoint step", labels=["pool"])
        for r in store.select("SELECT pool_id, MAX(json_extract(data, '$.step')) AS s FROM events "
                              "WHERE name = 'CheckpointPublished' GROUP BY pool_id"):
            steps.add_metric([str(r["pool_id"])], r["s"])
        yield steps
        if self.indexer is not None:
            i = self.indexer
            yield GaugeMetricFamily("proofswarm_explorer_indexed_block", "last block indexed",
                                    value=i.indexed_block if i.indexed_block is not None else -1)
            if i.head is not None and i.indexed_block is not None:
                yield GaugeMetricFamily("proofswarm_explorer_lag_blocks", "chain head minus last indexed block",
                                        value=max(0, i.head - i.indexed_block))
            yield CounterMetricFamily("proofswarm_explorer_polls", "index polls that succeeded", value=i.polls)
            yield CounterMetricFamily("proofswarm_explorer_poll_errors", "index polls that failed (RPC outage…)",
                                      value=i.errors)
        if self.fetcher is not None:
            yield CounterMetricFamily("proofswarm_explorer_objects_fetched", "IPFS objects fetched",
                                      value=self.fetcher.fetched)
            yield CounterMetricFamily("proofswarm_explorer_object_fetch_failures", "IPFS fetches that failed",
                                      value=self.fetcher.failed)


def create_app(explorer: Callable[[], Explorer], indexer: ChainIndexer | None = None,
               fetcher: ObjectFetcher | None = None, summary_path: Path | None = None) -> FastAPI:
    """The app; `explorer()` gives the calling thread its own read model (SQLite connections are per thread)."""
    app = FastAPI(title="proofswarm pool explorer", version="1",
                  description="Pools, checkpoints, the learning curve, workers, submissions, verdicts and evidence "
                              "of a proofswarm deployment, indexed from the chain and IPFS.")
    registry = CollectorRegistry()
    registry.register(IndexMetrics(explorer, indexer, fetcher))

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(BadId)
    async def _bad_id(_: Request, exc: BadId) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "request"
        return JSONResponse({"error": f"{where}: {first['msg']}"}, status_code=422)

    # ---------------------------------------------------------------- API
    # Each route's return type is its response model; a field a view leaves unset (a default of the model) is
    # left out of the answer, as the model's description says (response_model_exclude_unset).

    def get(path: str, summary: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
        return app.get("/api" + path, summary=summary, response_model_exclude_unset=True, responses=ERRORS)

    @get("/status", summary="Index position, chain head and the last indexing error")
    def status() -> StatusAnswer:
        e = explorer()
        head = e.live.head()
        out = StatusAnswer(chain_head=head, events=sum(e.store.count_events().values()))
        if indexer is not None:
            out.indexed_block, out.last_error = indexer.indexed_block, indexer.last_error
            out.lag_blocks = None if head is None or indexer.indexed_block is None \
                else max(0, head - indexer.indexed_block)
        return out

    @get("/pools", summary="Every pool")
    def pools(offset: int = Offset, limit: int = Limit) -> Page[PoolSummary]:
        return explorer().pools(offset, limit)

    @get("/pools/{pool_id}", summary="A pool: parameters, budget, reserved, counts, run spec")
    def pool(pool_id: int) -> Pool:
        return explorer().pool(pool_id)

    @get("/pools/{pool_id}/checkpoints", summary="Checkpoints by step, with their manifests")
    def checkpoints(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[Checkpoint]:
        return explorer().checkpoints(pool_id, offset, limit)

    @get("/pools/{pool_id}/curve", summary="Learning curve: per-step trainer metrics from IPFS")
    def curve(pool_id: int, offset: int = Offset, limit: int = Query(1000, ge=1, le=10_000)) -> Page[CurvePoint]:
        return explorer().curve(pool_id, offset, limit)

    @get("/pools/{pool_id}/workers", summary="Workers of the pool with submissions by status")
    def workers(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[PoolWorker]:
        return explorer().workers(pool_id, offset, limit)

    @get("/pools/{pool_id}/validators", summary="Validators with their verdict counts")
    def validators(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[PoolValidator]:
        return explorer().validators(pool_id, offset, limit)

    @get("/pools/{pool_id}/submissions", summary="Submissions, newest first, optionally by status")
    def submissions(pool_id: int, status: Status | None = None, offset: int = Offset,
                    limit: int = Limit) -> Page[Submission]:
        return explorer().submissions(pool_id, status, offset, limit)

    @get("/pools/{pool_id}/verdicts", summary="Attestations and challenges (reason, evidence digest)")
    def verdicts(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[PoolVerdict]:
        return explorer().verdicts(pool_id, offset, limit)

    @get("/pools/{pool_id}/slashes", summary="Slashes of the pool's workers")
    def slashes(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[Slash]:
        return explorer().slashes(pool_id, offset, limit)

    @get("/pools/{pool_id}/claims", summary="Reward claims that paid work of the pool")
    def claims(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[Claim]:
        return explorer().claims(pool_id, offset, limit)

    @get("/pools/{pool_id}/stats", summary="The pool owner's view: budget, fee budget, reserved, throughput, "
         "verdict and finality latency p50/p99, backlog, adversary rate, disputes")
    def pool_stats(pool_id: int) -> PoolStats:
        return explorer().pool_stats(pool_id)

    @get("/pools/{pool_id}/trainer", summary="The trainer's view: learning curve (reward, held-out accuracy, "
         "staleness, importance-sampling statistics), files consumed against work accepted")
    def trainer(pool_id: int) -> Trainer:
        return explorer().trainer(pool_id)

    @get("/pools/{pool_id}/court", summary="A court pool: rules, fee budget, cases by state, disputes, "
         "fees paid, validator penalties (404 if the ValidatorCourt does not judge the pool)")
    def court(pool_id: int) -> Court:
        return explorer().court(pool_id)

    @get("/pools/{pool_id}/cases", summary="The court's cases of the pool, newest first, optionally by state")
    def cases(pool_id: int, state: CaseStateName | None = None, offset: int = Offset, limit: int = Limit) -> Page[CaseSummary]:
        return explorer().cases(pool_id, state, offset, limit)

    @get("/pools/{pool_id}/court/validators", summary="The pool's bonded validators: bond, locked, reserved, "
         "verdicts, overturned, disputes, committee seats and votes, penalties, earnings")
    def court_validators(pool_id: int, offset: int = Offset, limit: int = Limit) -> Page[CourtValidator]:
        return explorer().court_validators(pool_id, offset, limit)

    @get("/cases/{work_id}", summary="A court case: deadlines, assignment, first verdict, disputes with "
         "their committees (and seed inputs) and votes, outcome, payments and penalties")
    def case(work_id: str) -> CourtCase:
        return explorer().case(work_id)

    @get("/validators/{address}", summary="A court validator: per pool its bond, locked/reserved/free stake, "
         "verdicts, overturned, disputes, seats, votes, penalties, fees; its credits and withdrawals")
    def validator(address: str) -> Validator:
        return explorer().validator(address)

    @get("/validators/{address}/verdicts", summary="A validator's first verdicts with how each case ended")
    def validator_verdicts(address: str, offset: int = Offset, limit: int = Limit) -> Page[ValidatorVerdict]:
        return explorer().validator_verdicts(address, offset, limit)

    @get("/validators/{address}/earnings", summary="A validator's credits and penalties over time, with "
         "running totals")
    def validator_earnings(address: str) -> ValidatorEarnings:
        return explorer().validator_earnings(address)

    @get("/workers/{address}", summary="A worker: stake, allocation, open works, submissions by verdict, "
         "rewards owed, claimable and claimed, slashes with their reasons")
    def worker(address: str) -> Worker:
        return explorer().worker(address)

    @get("/workers/{address}/submissions", summary="A worker's submissions, newest first")
    def worker_submissions(address: str, status: Status | None = None, offset: int = Offset,
                           limit: int = Limit) -> Page[Submission]:
        return explorer().worker_submissions(address, status, offset, limit)

    @get("/works/{work_id}", summary="A submission with its verdict, the reason explained (evidence, or "
         "the checks an accepted work passed), its court case and its timeline")
    def work(work_id: str) -> Work:
        return explorer().work(work_id)

    @get("/works/{work_id}/timeline", summary="A work's events from submission to payment or slash")
    def timeline(work_id: str) -> list[TimelineEntry]:
        return explorer().timeline(work_id)

    @get("/evidence/{digest}", summary="A challenge's evidence document, as put on IPFS")
    def evidence(digest: str) -> EvidenceAnswer:
        return explorer().evidence(digest)

    @get("/summary", summary="The demo's summary (runs/demo/summary.json), when there is one: the demo's own "
         "JSON, passed through as it is")
    def summary() -> JsonValue:
        if summary_path is None or not summary_path.is_file():
            raise HTTPException(404, f"no summary at {summary_path}" if summary_path else "no summary configured")
        try:
            return json.loads(summary_path.read_text())
        except json.JSONDecodeError:
            raise HTTPException(503, f"{summary_path} is being written; try again") from None

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    # ---------------------------------------------------------------- web page

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/pool/{pool_id}", include_in_schema=False)
    @app.get("/pool/{pool_id}/{section}", include_in_schema=False)
    @app.get("/worker/{key}", include_in_schema=False)
    @app.get("/work/{key}", include_in_schema=False)
    @app.get("/case/{key}", include_in_schema=False)
    @app.get("/validator/{key}", include_in_schema=False)
    def deep_link(request: Request) -> RedirectResponse:
        """The page's routes live in the hash (#/pool/1); a printed or pasted /pool/1 opens the same page."""
        return RedirectResponse("/#" + request.url.path, status_code=307)

    @app.get("/summary", include_in_schema=False)
    def summary_page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


class ThreadLocalExplorer:
    """`Explorer` per thread over one index file."""

    def __init__(self, make: Callable[[], Explorer]):
        self._make = make
        self._local = threading.local()

    def __call__(self) -> Explorer:
        e = getattr(self._local, "explorer", None)
        if e is None:
            e = self._local.explorer = self._make()
        return e
