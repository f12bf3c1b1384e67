"""The `[pool.court]` bounds `pool create` checks before any transaction, mirroring CourtRules (docs/protocol.md §1.2):
a dispute's vote pay, the same whichever side wins, fits the losing side's stake; the activation delay (a
validator's exit delay too) is bounded by the pool's challenge window."""

from __future__ import annotations

import tomllib

import pytest
from pydantic import ValidationError

from deploy.pool_cli import CourtConfig, PoolConfig, vote_pay
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
