"""The honest spread is the pool's to state (docs/protocol.md R6.18): the run spec's `verification.spread_shape` k and
`verification.miscalibration` c (defaults 0.5 and 2) are the null's, so the per-worker e-process of every file is
computed with them; a k that is no Gamma shape, a c below 1, or a c at which the spread allows every token at the
hard bound (the test could never challenge) is refused with one line."""

from __future__ import annotations

import math
import tomllib

import pytest
from pydantic import ValidationError

from cli.errors import EXIT_USAGE
from proofs.margins import MISCALIBRATION, SPREAD_SHAPE, WORKER_LAMBDAS, MarginNull, mixture_log_mgf
from protocol.manifest import PolicyVerification
from protocol.runspec import RunSpec, RunSpecFileError, load_policy_verification
from tests.support.paths import ROOT
from trainer.main import main as trainer_main

TAIL = [9.6e-4, 9.0e-4, 7.9e-4, 4.7e-4, 3.2e-5, 3.2e-5]
"""A bf16 pool's calibrated tails (the suite's bf16 profile): its last level's 3.2e-5 caps c below 31,250."""


def spec(**verification) -> RunSpec:
    doc = tomllib.loads((ROOT / "examples" / "run.toml").read_text())
    doc["verification"] |= {"margin_tail": TAIL} | verification
    return RunSpec.model_validate(doc)


def excess(tail: list[float], levels: list[float], lam: float) -> float:
    """a(λ) = E[e^{λm}] − 1 of the dominating distribution: q_k − q_{k+1} at θ_{k+1}, q_K at 1 (proofs.margins)."""
    points, nexts = [*levels[1:], 1.0], [*tail[1:], 0.0]
    return sum((q - q_next) * math.expm1(lam * x) for q, q_next, x in zip(tail, nexts, points))


def test_a_spec_that_names_no_spread_keeps_the_measured_one():
    v = spec().verification
    assert (v.spread_shape, v.miscalibration) == (SPREAD_SHAPE, MISCALIBRATION) == (0.5, 2.0)
    null = v.margin_null()
    assert (null.spread_shape, null.miscalibration) == (0.5, 2.0)
    assert null == MarginNull(levels=tuple(v.margin_levels), tail=tuple(TAIL), tokens=v.margin_tokens)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("spread_shape", 0.0, "greater than 0"),  # Gamma(0) is no law: the spread would be unbounded
    ("spread_shape", -0.5, "greater than 0"),
    ("spread_shape", math.inf, "finite number"),  # G ≡ 1: tokens i.i.d., which issue 45 measured unsound
    ("spread_shape", math.nan, "finite number"),
    ("miscalibration", 0.99, "greater than or equal to 1"),  # below the calibration's own upper bounds
    ("miscalibration", math.inf, "finite number"),
    ("miscalibration", 1 / 3.2e-5, "could never challenge; use a miscalibration below 3.125e\\+04"),
])
def test_a_spread_that_makes_the_worker_test_unsound_or_blind_is_refused(field, value, message):
    with pytest.raises(ValidationError, match=message):
        spec(**{field: value})


def test_any_other_spread_is_the_pools_to_state():
    assert spec(spread_shape=1e-3, miscalibration=1.0).verification.margin_null().spread_shape == 1e-3
    assert spec(spread_shape=1e4, miscalibration=31_249.0).verification.margin_null().miscalibration == 31_249.0


def test_the_worker_e_process_uses_the_specs_spread_as_the_formula_says():
    """A file's factor exp(λS − L_n(λ)), L_n(λ) = log E_G[(1 + G·x)^n] with x = c·a(λ), G ~ Gamma(k, mean 1): a spec's
    own k and c enter as the formula says, and another k or c gives another factor (less spread, a larger one)."""
    score, tokens = 3.0, 512
    for k, c in ((0.5, 2.0), (0.25, 2.0), (0.5, 3.0), (4.0, 1.0)):
        v = spec(spread_shape=k, miscalibration=c).verification
        expected = [lam * score - mixture_log_mgf(math.log(c * excess(TAIL, v.margin_levels, lam)), tokens, k)
                    for lam in WORKER_LAMBDAS]
        assert v.margin_null().worker_log_terms(score, [tokens]) == pytest.approx(expected, rel=1e-9)
    e = {(k, c): spec(spread_shape=k, miscalibration=c).verification.margin_null().worker_log_e_value(score, [tokens])
         for k, c in ((0.25, 2.0), (0.5, 2.0), (1.0, 2.0), (0.5, 1.0), (0.5, 4.0))}
    assert e[0.25, 2.0] < e[0.5, 2.0] < e[1.0, 2.0]
    assert e[0.5, 4.0] < e[0.5, 2.0] < e[0.5, 1.0]


def test_a_policys_own_tails_keep_the_specs_spread():
    """Files of a policy with recalibrated tails are judged with the looser tails and the run spec's k and c (a
    policy's manifest states no spread)."""
    run = spec(spread_shape=0.3, miscalibration=1.5)
    v = run.verification
    policy = PolicyVerification(logit_tolerance=v.logit_tolerance, margin_levels=v.margin_levels,
                                margin_tail=[2 * q for q in TAIL], margin_tokens=10**5,
                                toploc_min_exp_matches=v.toploc_min_exp_matches,
                                toploc_max_mant_err_mean=v.toploc_max_mant_err_mean,
                                toploc_max_mant_err_median=v.toploc_max_mant_err_median,
                                toploc_mean_excludes_max=v.toploc_mean_excludes_max, toploc_by_tokens=[])
    null = run.verification_for(policy).margin_null()
    assert (null.spread_shape, null.miscalibration, null.tail) == (0.3, 1.5, tuple(2 * q for q in TAIL))


def test_a_policy_file_whose_tails_would_blind_the_worker_test_is_refused(tmp_path):
    run = spec(miscalibration=20_000.0)  # 20,000 × 3.2e-5 < 1; × a recalibrated 1e-4 ≥ 1
    v = run.verification
    path = tmp_path / "policy.toml"
    path.write_text(f"""[verification]
logit_tolerance = {v.logit_tolerance}
margin_levels = {v.margin_levels}
margin_tail = {TAIL[:-2] + [1e-4, 1e-4]}
margin_tokens = 100000
toploc_min_exp_matches = {v.toploc_min_exp_matches}
toploc_max_mant_err_mean = {v.toploc_max_mant_err_mean}
toploc_max_mant_err_median = {v.toploc_max_mant_err_median}
toploc_mean_excludes_max = {str(v.toploc_mean_excludes_max).lower()}
toploc_by_tokens = []
""")
    with pytest.raises(RunSpecFileError, match="miscalibration 20000 times the margin tail 0.0001 .* could never"):
        load_policy_verification(path, run)


def test_trainer_init_refuses_a_bad_spread_in_one_line(tmp_path, capsys):
    text = (ROOT / "examples" / "run.toml").read_text().replace("[verification]\n", "[verification]\nspread_shape = 0\n")
    (tmp_path / "run.toml").write_text(text)
    assert trainer_main(["init", "--run-spec", str(tmp_path / "run.toml")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "error: invalid configuration: verification.spread_shape: Input should be greater than 0\n"

