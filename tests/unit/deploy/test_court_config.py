"""The `[pool.court]` bounds `pool create` checks before any transaction, mirroring CourtRules (docs/protocol.md §1.2):
a dispute's vote pay, the same whichever side wins, fits the losing side's stake; the activation delay (a
validator's exit delay too) is bounded by the pool's challenge window."""

from __future__ import annotations

import tomllib

import pytest
from pydantic import ValidationError

from cli.errors import UsageError
from deploy.terms import DEPLOY_COURT_MIN_PERIOD_S
from deploy.pools import (CourtConfig, PoolConfig, check_court_bounds, check_forced_error_bounds, check_spot_check_bound,
                          check_validator_windows, load_pool_config, vote_pay)
from protocol.runspec import load_run_spec
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _court_table() -> dict:
    return tomllib.loads((EXAMPLES / "pool-court.toml").read_text())["pool"]["court"]


def test_the_shipped_court_pays_a_vote_less_than_a_silent_seat_loses():
    court = CourtConfig(**_court_table())
    pay = vote_pay(court.non_voter_penalty)
    assert 0 < pay < court.non_voter_penalty  # a coin flip beside honest members: (pay - penalty) / 2 < 0
    assert court.committee_size * pay <= min(court.dispute_bond, court.wrong_verdict_slash)


def test_a_committee_whose_vote_pay_exceeds_the_dispute_bond_is_refused():
    table = _court_table() | {"non_voter_penalty": "20e18", "dispute_bond": "20e18"}  # 3 × 10 > 20
    with pytest.raises(ValidationError, match="vote pay"):
        CourtConfig(**table)


def test_an_activation_delay_longer_than_the_challenge_window_is_refused():
    pool = tomllib.loads((EXAMPLES / "pool-court.toml").read_text())["pool"]
    pool.pop("court")
    window = 600
    court = CourtConfig(**(_court_table() | {"activation_delay_s": window + 1}))
    with pytest.raises(ValidationError, match="activation_delay_s"):
        PoolConfig.model_validate(pool | {"challenge_window_s": window, "reward_lock_s": window + 1, "court": court})


def _shipped(name: str) -> PoolConfig:
    """A shipped example as `pool create` reads it on the devnet, `@role` and `@init` resolved to stand-ins."""
    roles = {role: {"address": "0x" + f"{n + 1:02x}" * 20} for n, role in enumerate(("trainer", "validator"))}
    init = {"task": "0x" + "ab" * 32, "base_checkpoint": "0x" + "cd" * 32}
    return load_pool_config(EXAMPLES / name, {"roles": roles}, init)


@pytest.mark.parametrize("name", ["pool.toml", "pool-court.toml", "pool-court-forced.toml"])
def test_each_shipped_pool_config_fits_the_default_deployment_and_the_validators_defaults(name: str) -> None:
    """Issue 47: examples/pool-court.toml was refused on a chain deployed with `devnet deploy`'s defaults
    (--court-min-period 36: commit_period_s 30 < 72). Every check `pool create` makes before its first transaction
    that depends on the deployment passes at that minimum period, with examples/run.toml's files."""
    cfg = _shipped(name)
    spec = load_run_spec(EXAMPLES / "run.toml")
    check_spot_check_bound(cfg, spec)
    if cfg.court is not None:
        check_validator_windows(cfg.court)
        check_court_bounds(cfg, spec, DEPLOY_COURT_MIN_PERIOD_S)
        check_forced_error_bounds(cfg, spec, DEPLOY_COURT_MIN_PERIOD_S)


@pytest.mark.parametrize("window", ["verdict_window_s", "dispute_window_s", "commit_period_s"])
def test_a_court_window_a_validator_with_the_defaults_cannot_serve_is_refused(window: str) -> None:
    """A validator fetches a file (up to --fetch-timeout, 20 s) and keeps --verdict-margin (30 s) to answer in the
    verdict window (judge), the dispute window (audit) and the commit period (vote): `pool create` refuses a court
    with any of them under 50 s, in one line naming it and the bound (issue 47: a 10 s dispute window was created,
    then refused by `validator start`)."""
    court = CourtConfig(**(_court_table() | {"assigned_window_s": 5, window: 10}))
    with pytest.raises(UsageError) as refused:
        check_validator_windows(court)
    assert str(refused.value).startswith(f"court {window} is 10 s, below 50 s: a validator with `validator start`'s "
                                         "defaults (--fetch-timeout 20 s + --verdict-margin 30 s)")
