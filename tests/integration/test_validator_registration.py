"""`validator start` says when it has registered with a court pool, how much stake it locked and why (issue 47,
finding 7: it said nothing until its first verdict, 87 s, while it locked 480 tokens where the guide said 200); `pool
status` names the court, its rules, its fee budget and the validators registered (finding 11)."""

from __future__ import annotations

from cli.output import print_result
from deploy.pools import CourtConfig, create_pool, pool_status
from tests.support.conftest_chain import TOKENS, pool_config
from validator.court import register_with_court


def test_registering_returns_the_line_the_daemon_logs(chain, capsys) -> None:
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

    status = pool_status(chain.owner, pool_id)  # the court, visible: its rules, budget and the validator just registered
    assert status["judged_by"] == f"ValidatorCourt {chain.owner.court.address}"
    assert (status["court_validator_bond"], status["court_verdict_fee"], status["court_committee_size"],
            status["court_dispute_window_s"], status["court_activation_delay_s"]) == (200 * TOKENS, TOKENS, 3, 50, 5)
    assert status["court_validators"] == [chain.accounts[3].address] and status["court_active_validators"] == 1
    assert status["court_fee_budget"] == chain.owner.court.fee_budget(pool_id)
    print_result(status, as_json=False)
    shown = capsys.readouterr().out
    assert "court_validator_bond" in shown and "200 tokens" in shown and chain.accounts[3].address in shown
    assert pool_status(chain.owner, create_pool(chain.owner, pool_config(chain.accounts))).get("judged_by") is None
