"""The `[pool.court.forced_errors]` bounds `pool create` checks before any transaction, mirroring
`ForcedErrors.check` (docs/protocol.md §1.3, R1.17–R1.22): each rule refused on each side it has, in one line naming
the rule; the shipped example passes; a court pool without the table has no forced errors."""

from __future__ import annotations

import pytest

from cli.errors import UsageError
from deploy.pools import ForcedErrorsConfig, check_forced_error_bounds, load_pool_config
from deploy.terms import DEPLOY_COURT_MIN_PERIOD_S
from protocol.runspec import load_run_spec
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
SPEC = load_run_spec(EXAMPLES / "run.toml")  # 8 prompts × 16 completions: the largest file's reward R is 128 tokens
E18 = 10**18


def _pool(name: str = "pool-court-forced.toml", **forced):
    roles = {role: {"address": "0x" + f"{n + 1:02x}" * 20} for n, role in enumerate(("trainer", "validator"))}
    init = {"task": "0x" + "ab" * 32, "base_checkpoint": "0x" + "cd" * 32}
    cfg = load_pool_config(EXAMPLES / name, {"roles": roles}, init)
    if forced:
        table = cfg.court.forced_errors.model_dump() | forced
        cfg.court.forced_errors = ForcedErrorsConfig(**table)
    return cfg


def _refused(rule: str, **forced) -> str:
    with pytest.raises(UsageError) as refused:
        check_forced_error_bounds(_pool(**forced), SPEC, DEPLOY_COURT_MIN_PERIOD_S)
    line = str(refused.value)
    assert line.startswith("forced_errors: ") and f"(docs/protocol.md {rule})" in line and "\n" not in line
    return line


def test_the_shipped_forced_error_pool_passes_and_a_court_pool_without_the_table_has_none():
    cfg = _pool()
    fe = cfg.court.forced_errors
    assert (fe.forced_bps, fe.jackpot) == (200, 1000 * E18)  # bench.economics' defaults (ρ = 2 %, J = 1,000)
    check_forced_error_bounds(cfg, SPEC, DEPLOY_COURT_MIN_PERIOD_S)
    assert fe.params().epoch_length == fe.epoch_length_s
    assert _pool("pool-court.toml").court.forced_errors is None
    check_forced_error_bounds(_pool("pool-court.toml"), SPEC, DEPLOY_COURT_MIN_PERIOD_S)  # nothing to check


@pytest.mark.parametrize("bps", [0, 1001])
def test_r1_17_the_forced_rate_is_at_most_ten_percent(bps: int):
    assert f"forced_bps {bps} must be in 1..1000" in _refused("R1.17", forced_bps=bps)


@pytest.mark.parametrize("bps", [0, 10_001])
def test_r1_18_the_audit_rate_is_a_rate(bps: int):
    assert f"audit_bps {bps}" in _refused("R1.18", audit_bps=bps)


@pytest.mark.parametrize(("name", "seconds"), [("epoch_length_s", DEPLOY_COURT_MIN_PERIOD_S - 1),
                                               ("epoch_length_s", 7 * 24 * 3600 + 1),
                                               ("reveal_window_s", DEPLOY_COURT_MIN_PERIOD_S - 1),
                                               ("reveal_window_s", 7 * 24 * 3600 + 1)])
def test_r1_19_periods_are_between_the_courts_minimum_and_a_week(name: str, seconds: int):
    assert f"{name} {seconds} must be in {DEPLOY_COURT_MIN_PERIOD_S}..604800" in _refused("R1.19", **{name: seconds})


def test_r1_20_the_bonds_cover_a_lazy_verdict_and_an_accepted_forced_error():
    assert "wrong_verdict_slash" in _refused("R1.20", validator_bond=60 * E18 - 1)
    check_forced_error_bounds(_pool(validator_bond=60 * E18, worker_bond=178 * E18), SPEC, DEPLOY_COURT_MIN_PERIOD_S)
    line = _refused("R1.20", worker_bond=178 * E18 - 1)  # slash 50 + the file's reward 128
    assert f"({50 * E18} + {128 * E18})" in line


@pytest.mark.parametrize("penalty", [0, 15 * E18 + 1])
def test_r1_21_a_withheld_link_costs_at_most_a_quarter_of_a_wrong_verdict(penalty: int):
    assert f"silence_penalty {penalty}" in _refused("R1.21", silence_penalty=penalty)


def test_r1_22_verification_pays_at_most_what_the_work_does():
    assert "jackpot 0 must be positive" in _refused("R1.22", jackpot=0)
    most = 10_000 * 128 * E18 // 200  # ρ·J ≤ R at ρ = 2 %: J ≤ 6,400 tokens
    check_forced_error_bounds(_pool(jackpot=most), SPEC, DEPLOY_COURT_MIN_PERIOD_S)
    _refused("R1.22", jackpot=most + 1)
