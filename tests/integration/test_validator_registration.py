"""`validator start` says when it has registered with a court pool, how much stake it locked and why (issue 47,
finding 7: it said nothing until its first verdict, 87 s, while it locked 480 tokens where the guide said 200)."""

from __future__ import annotations

from deploy.pool_cli import CourtConfig, create_pool
from tests.support.conftest_chain import TOKENS, pool_config
from validator.court import register_with_court


def test_registering_returns_the_line_the_daemon_logs(chain) -> None:
    court = CourtConfig(validator_bond=200 * TOKENS, verdict_fee=TOKENS, dispute_bond=20 * TOKENS,
                        wrong_verdict_slash=60 * TOKENS, non_voter_penalty=10 * TOKENS, silence_penalty=5 * TOKENS,
                        assigned_window_s=25, verdict_window_s=60, dispute_window_s=50, commit_period_s=50,
                        reveal_period_s=10, activation_delay_s=5, committee_size=3)
    pool_id = create_pool(chain.owner, pool_config(chain.accounts, validators=[], court=court, challenge_window_s=300,
                                                   reward_lock_s=301))
    chain.ledger(0).token.mint(chain.accounts[3].address, 1_000 * TOKENS)  # the deployer owns the dev token
    why = "8 open verdicts × wrong_verdict_slash 60 tokens, at least the pool's validator_bond 200 tokens"
    assert register_with_court(chain.validator, pool_id) == (
        f"registered with pool {pool_id}'s court: 480 tokens locked ({why}); it is drawn for work submitted 5 s from "
        "now on (the activation delay)")
    assert register_with_court(chain.validator, pool_id) == (
        f"registered with pool {pool_id}'s court already: 480 tokens locked ({why})")
