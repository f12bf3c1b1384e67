"""Which engines can generate an exact pool's completions (docs/protocol.md R5.8): the torch path on any device
computes the integer policy; vLLM cannot, and is refused before a worker stakes."""

from __future__ import annotations

import tomllib

from inference.device import Compute
from protocol.runspec import RunSpec
from tests.support.paths import ROOT
from worker.produce import engine_problem


def _spec(inference: str) -> RunSpec:
    return RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run.toml").read_text()) | {"inference": inference})


def test_vllm_is_refused_in_an_exact_pool_only():
    assert "--backend vllm cannot compute" in engine_problem(_spec("exact"), Compute(backend="vllm"))
    assert engine_problem(_spec("exact"), Compute(backend="torch")) is None
    assert engine_problem(_spec("float"), Compute(backend="vllm")) is None
