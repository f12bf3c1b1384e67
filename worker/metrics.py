"""Prometheus metrics of `worker start` (`--metrics-port`), named like the other roles' (proofswarm_<role>_…):
what the worker submitted, how its work was judged, why it was challenged, what it was slashed, re-staked and
claimed. Its own registry, so several workers can live in one process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.submissions = Counter("proofswarm_worker_submissions", "rollout files submitted", registry=r)
        self.samples = Counter("proofswarm_worker_samples", "samples submitted", registry=r)
        self.verdicts = Counter("proofswarm_worker_verdicts", "own submissions judged, by final status", ["status"],
                                registry=r)
        self.challenges = Counter("proofswarm_worker_challenges", "own submissions challenged, by reason", ["reason"],
                                  registry=r)
        self.slashed = Counter("proofswarm_worker_slashed_tokens", "stake slashed (tokens)", registry=r)
        self.restaked = Counter("proofswarm_worker_restaked_tokens", "stake allocated again after slashes (tokens)",
                                registry=r)
        self.claimed = Counter("proofswarm_worker_claimed_tokens", "rewards claimed (tokens)", registry=r)
        self.pending = Gauge("proofswarm_worker_pending_verdicts", "own submissions awaiting a verdict", registry=r)
        self.policy_step = Gauge("proofswarm_worker_policy_step", "step of the policy generating", registry=r)

    def verdict(self, status: str) -> None:
        self.verdicts.labels(status).inc()

    def challenged(self, challenge: dict) -> None:
        self.challenges.labels(challenge["reason"]).inc()
        self.slashed.inc(int(challenge["slashed"]) / 10**18)

    def serve(self, port: int) -> None:
        start_http_server(port, addr="127.0.0.1", registry=self.registry)
