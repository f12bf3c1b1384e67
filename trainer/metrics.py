"""Prometheus metrics of `trainer start` (`--metrics-port`), named like the other roles' (proofswarm_<role>_…):
where training is, what it consumed, and the learning curve's latest point (the same numbers it publishes with
each checkpoint, docs: the explorer's trainer page)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, start_http_server

CURVE = {"reward": "mean reward of the rollouts taken in since the last step",
         "accuracy": "greedy held-out accuracy (when evaluated)", "loss": "training loss",
         "staleness_mean": "mean trainer step − policy step of the batch", "staleness_max": "largest staleness",
         "is_weight_mean": "mean importance-sampling weight", "is_truncated_fraction": "IS weights truncated",
         "clipped_fraction": "tokens whose ratio was clipped", "idle_s": "seconds the step waited for work"}


class TrainerMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.step = Gauge("proofswarm_trainer_step", "trainer steps taken", registry=r)
        self.consumed = Gauge("proofswarm_trainer_files_consumed", "accepted rollout files trained on", registry=r)
        self.overturned = Gauge("proofswarm_trainer_consumed_overturned",
                                "files consumed whose accepting verdict a dispute later overturned", registry=r)
        self.curve = {k: Gauge(f"proofswarm_trainer_{k}", text, registry=r) for k, text in CURVE.items()}

    def update(self, step: int, metrics: dict | None, consumed: int, overturned: int) -> None:
        self.step.set(step)
        self.consumed.set(consumed)
        self.overturned.set(overturned)
        for key, gauge in self.curve.items():
            value = (metrics or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                gauge.set(value)

    def serve(self, port: int) -> None:
        start_http_server(port, addr="127.0.0.1", registry=self.registry)
