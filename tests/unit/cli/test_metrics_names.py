"""Every daemon serves Prometheus /metrics (`--metrics-port`; the explorer on its own port) under one naming
scheme: proofswarm_<role>_<what>, so one dashboard can scrape a whole swarm."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from dashboard.app import IndexMetrics
from trainer.metrics import TrainerMetrics
from worker.metrics import WorkerMetrics


def _names(registry) -> set[str]:
    return {m.name for m in registry.collect()}


def test_each_role_s_metrics_carry_its_name():
    from validator.metrics import Metrics as ValidatorMetrics

    for role, registry in (("worker", WorkerMetrics().registry), ("trainer", TrainerMetrics().registry),
                           ("validator", ValidatorMetrics().registry)):
        names = _names(registry)
        assert names and all(n.startswith(f"proofswarm_{role}_") for n in names), (role, names)
    assert IndexMetrics.__module__ == "dashboard.app"  # proofswarm_explorer_*: tests/integration/test_dashboard.py reads them


def test_the_trainer_exports_its_latest_curve_point():
    m = TrainerMetrics()
    m.update(7, {"reward": 0.25, "accuracy": 0.5, "staleness_mean": 1.5, "is_weight_mean": 0.97, "submission_staleness": [1]},
             consumed=12, overturned=1)
    text = generate_latest(m.registry).decode()
    for line in ("proofswarm_trainer_step 7.0", "proofswarm_trainer_files_consumed 12.0",
                 "proofswarm_trainer_consumed_overturned 1.0", "proofswarm_trainer_reward 0.25",
                 "proofswarm_trainer_accuracy 0.5", "proofswarm_trainer_is_weight_mean 0.97"):
        assert line in text, line


@pytest.mark.parametrize("argv", [["worker", "start"], ["validator", "start"], ["trainer", "start"]])
def test_every_daemon_takes_a_metrics_port(argv, capsys):
    import importlib

    main = importlib.import_module({"worker": "worker.cli", "validator": "validator.cli",
                                    "trainer": "trainer.main"}[argv[0]]).main
    with pytest.raises(SystemExit):
        main([argv[1], "--help"])
    assert "--metrics-port" in capsys.readouterr().out
