"""A floor on completion length for TOPLOC's own-proof check (docs/protocol.md R6.25): a run spec whose
`verification.min_toploc_tokens` is set refuses a `sampling.max_tokens` below it, so no pool samples completions
too short for the chunk count to see; the minimum itself is 0 or at least the shortest chunk the count counts."""

from __future__ import annotations

import tomllib

import pytest
from pydantic import ValidationError

from proofs.toploc_thresholds import COUNTED_FROM_TOKENS
from protocol.runspec import RunSpec
from tests.support.paths import ROOT


def _spec(max_tokens: int, min_toploc_tokens: int) -> RunSpec:
    doc = tomllib.loads((ROOT / "examples" / "run.toml").read_text())
    doc["sampling"]["max_tokens"] = max_tokens
    doc["verification"]["min_toploc_tokens"] = min_toploc_tokens
    return RunSpec.model_validate(doc)


def test_a_spec_refuses_completions_shorter_than_its_toploc_minimum():
    assert _spec(16, 16).sampling.max_tokens == 16
    assert _spec(8, 0).verification.min_toploc_tokens == 0  # no minimum: examples/run.toml's 8 tokens stand
    with pytest.raises(ValidationError, match="sampling.max_tokens 8 is below verification.min_toploc_tokens 16"):
        _spec(8, 16)


def test_the_minimum_is_none_or_at_least_the_shortest_counted_chunk():
    _spec(16, COUNTED_FROM_TOKENS)
    with pytest.raises(ValidationError, match=f"min_toploc_tokens {COUNTED_FROM_TOKENS - 1} is below "
                                              f"{COUNTED_FROM_TOKENS}, the shortest chunk"):
        _spec(16, COUNTED_FROM_TOKENS - 1)
