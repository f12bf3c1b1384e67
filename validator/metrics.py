"""The validator's Prometheus metrics (names held by tests/unit/cli/test_metrics_names.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


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
