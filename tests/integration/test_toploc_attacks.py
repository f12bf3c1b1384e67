"""The attack & honesty suite: real generation with small models, every check of the
validator. Every dishonest completion must be rejected and every honest one accepted; the
confusion matrix is printed."""

from __future__ import annotations

import pytest

from adversaries.toploc import SuiteSetup, confusion, format_suite, run_suite
from protocol.runspec import SamplingSpec


def _assert_perfect(setup: SuiteSetup, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = run_suite(setup)["fp32"]
    with capsys.disabled():
        print()
        print(format_suite(outcomes, f"attack & honesty suite ({setup.hidden}x{setup.layers})"))
    matrix = confusion(outcomes)
    assert matrix["false_negative"] == 0, [o.name for o in outcomes if not o.correct]
    assert matrix["false_positive"] == 0, [o.name for o in outcomes if not o.correct]
    assert sum(not o.honest for o in outcomes) >= 11 + setup.layers
    # an attack whose every completion equals the honest one would test nothing
    assert all(o.tampered > 0 for o in outcomes if not o.honest)
    assert matrix["true_positive"] > 0 and matrix["true_negative"] > 0


def test_every_attack_detected_and_no_honest_run_rejected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup = SuiteSetup(
        hidden=64, layers=3, n_prompts=3,
        params=SamplingSpec(temperature=1.0, top_p=1.0, max_tokens=48),
    )
    _assert_perfect(setup, capsys)


@pytest.mark.slow
def test_suite_on_a_larger_model_and_more_prompts(capsys: pytest.CaptureFixture[str]) -> None:
    setup = SuiteSetup(
        hidden=128, layers=4, n_prompts=6,
        params=SamplingSpec(temperature=0.9, top_p=0.95, max_tokens=96),
    )
    _assert_perfect(setup, capsys)
