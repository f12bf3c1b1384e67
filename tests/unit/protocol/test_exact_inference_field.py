"""The run spec's `inference` field (docs/protocol.md §5.1): float by default, `exact` selects the integer policy,
and a spec exact mode cannot serve (top-p < 1, a floor on p(EOS)) is refused when it is loaded, in one message."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from protocol.runspec import RunSpec, load_run_spec
from tests.support.paths import ROOT


def _spec(**changes) -> dict:
    doc = tomllib.loads((ROOT / "examples" / "run.toml").read_text())
    for table, values in changes.items():
        if isinstance(values, dict):
            doc.setdefault(table, {}).update(values)
        else:
            doc[table] = values
    return doc


def test_a_spec_is_float_unless_it_says_exact():
    assert RunSpec.model_validate(_spec()).inference == "float"
    assert RunSpec.model_validate(_spec(inference="exact")).inference == "exact"


def test_a_spec_file_selects_exact_mode_at_the_top_level(tmp_path: Path):
    text = (ROOT / "examples" / "run.toml").read_text()
    path = tmp_path / "run.toml"
    path.write_text('inference = "exact"\n' + text)
    assert load_run_spec(path).inference == "exact"


def test_exact_mode_refuses_top_p_below_one():
    with pytest.raises(ValidationError, match='inference = "exact" samples with top_p = 1 only') as caught:
        RunSpec.model_validate(_spec(inference="exact", sampling={"top_p": 0.9}))
    assert caught.value.error_count() == 1
    assert RunSpec.model_validate(_spec(sampling={"top_p": 0.9})).sampling.top_p == 0.9  # float mode has top-p


def test_exact_mode_refuses_a_floor_on_the_eos_probability():
    with pytest.raises(ValidationError, match="min_eos_prob must be 0"):
        RunSpec.model_validate(_spec(inference="exact", verification={"min_eos_prob": 0.01}))


def test_an_unknown_inference_mode_is_refused():
    with pytest.raises(ValidationError, match="inference"):
        RunSpec.model_validate(_spec(inference="int4"))
