"""bench.economics (issue 43's simulation): the court's settlement as DisputeSettlement pays it, payoffs of cases a
hand can compute (every validator honest at r = 0 earns the fee less its checks; a lazy judge at r = 0 saves the check
and loses nothing — the verifier's dilemma), the cartel's expectation, the JSON line's keys, and bad flags refused in
one line with exit 2. Small runs only."""

from __future__ import annotations

import json
import math

import pytest

from bench import economics as eco
from cli.errors import EXIT_USAGE
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def court() -> eco.Court:
    return eco.load_court(eco.DEFAULT_POOL, eco.DEFAULT_RUN_SPEC)


def test_the_shipped_court_is_read_from_the_pool_and_its_run_spec(court) -> None:
    # examples/pool-court.toml with examples/run.toml's 8 prompts × 16 completions, q = 1
    assert (court.reward, court.slash, court.bounty, court.fee) == (128, 50, 10, 0.1)
    assert (court.wrong_verdict_slash, court.dispute_bond, court.non_voter_penalty, court.vote_pay) == (60, 20, 10, 5)
    assert (court.silence_penalty, court.committee_size, court.detect) == (5, 3, 1.0)


def test_settlement_pays_as_the_contract(court) -> None:
    # overturned 2–1: the judge's 60 and the minority seat's 10; two voters paid 5 each, the disputer the other 60
    s = eco.settle(court, False, "j", "d", [("a", True), ("b", True), ("c", False)])
    assert (s.decided, s.work_valid, s.overturned, s.winner) == (True, True, True, "d")
    assert dict(s.pays) == {"j": -60, "c": -10, "a": 5, "b": 5, "d": 60}
    # upheld 3–0: the disputer's 20 pays each voter 5, the judge the rest
    s = eco.settle(court, True, "j", "d", [("a", True), ("b", True), ("c", True)])
    assert (s.work_valid, s.overturned, dict(s.pays)) == (True, False, {"d": -20, "a": 5, "b": 5, "c": 5, "j": 5})
    # a tie (one seat silent) keeps the verdict; the pot goes to the fee budget, nobody is paid from it
    s = eco.settle(court, True, "j", "d", [("a", True), ("b", False), ("c", None)])
    assert (s.work_valid, s.overturned, dict(s.pays)) == (True, False, {"d": -20, "c": -10})
    # no vote: the round is not decided, every silent seat pays
    s = eco.settle(court, True, "j", "d", [("a", None), ("b", None), ("c", None)])
    assert not s.decided and dict(s.pays) == {"a": -10, "b": -10, "c": -10}


def _model(court: eco.Court, audit_rate: float, check: float = 2.0, generation: float = 50.0) -> eco.Model:
    return eco.Model(court, validators=5, audit_rate=audit_rate, check_cost=check, generation_cost=generation,
                     cheater_share=0.5)


@pytest.mark.parametrize("audit_rate", [0.0, 1.0])
def test_every_validator_honest_at_r0_earns_the_fee_less_its_checks(court, audit_rate) -> None:
    model = _model(court, audit_rate)
    run = eco.simulate(model, (eco.HONEST,) * 5, 0.0, 400, "t")
    totals = run.validator_pay.sum(axis=0)
    others = 400 - run.assigned  # at audit rate 1 every validator audits every verdict it did not give
    expected = (court.fee - model.check_cost) * run.assigned - model.check_cost * audit_rate * others
    assert totals == pytest.approx(expected)
    assert run.worker_pay == pytest.approx([court.reward - model.generation_cost] * 400)
    assert run.counts["disputes"] == 0


def test_a_lazy_judge_at_r0_saves_the_check_and_loses_nothing(court) -> None:
    model = _model(court, 0.3)
    honest = eco.simulate(model, (eco.HONEST,) * 5, 0.0, 400, "t")
    lazy = eco.simulate(model, (eco.LAZY,) + (eco.HONEST,) * 4, 0.0, 400, "t")  # the same draws
    assert lazy.validator_pay[:, 0].sum() == pytest.approx(court.fee * lazy.assigned[0])
    gain = lazy.validator_pay[:, 0].sum() - honest.validator_pay[:, 0].sum()
    assert gain == pytest.approx(model.check_cost * honest.checks[0]) and gain > 0
    assert lazy.validator_pay[:, 1:] == pytest.approx(honest.validator_pay[:, 1:])  # the others lose nothing either


def test_the_cartels_expectation_of_disputing_a_rejection_of_its_ally(court) -> None:
    # 3 of 10 in the cartel: the committee of 3 is drawn from the 8 validators that are not parties, 2 of them cartel
    plan = eco.cartel_plan(_model(court, 0.1), (eco.CARTEL,) * 3 + (eco.HONEST,) * 7)
    both = 60 + court.fee + 2 * court.vote_pay + court.reward  # overturned: the judge's slash less the seats' pay
    one = -court.dispute_bond - court.non_voter_penalty - court.slash  # upheld, the cartel seat in the minority
    none = -court.dispute_bond - court.slash
    expected = (6 * both + 30 * one + 20 * none) / 56 + court.slash
    assert plan.values["dispute_rejection_of_ally"] == pytest.approx(expected, abs=1e-4)
    assert plan.dispute_ally_rejects == (expected > 0)
    assert not plan.challenge_outsiders  # a false challenge of an outsider does not pay at these amounts


def test_the_command_prints_the_table_then_one_json_line(capsys) -> None:
    code = eco.main(["--files", "300", "--validators", "5", "--audit-rate", "0", "--check-cost", "2",
                     "--generation-cost", "50", "--cheat-rate", "0,0.1", "--cartel", "0,1/3", "--forced-bps", "0"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert isinstance(result["honest_check_best_response"], bool) and isinstance(result["cheating_unprofitable"], bool)
    assert {"payoff_table", "break_even", "parameters"} <= set(result)
    rows = {(row["r"], row["cartel"], row["strategy"]): row for row in result["payoff_table"]}
    assert rows[0.0, 0, "validator honest"]["payoff"] == pytest.approx(0.1 - 2)  # fee − check, per assigned file
    assert rows[0.0, 0, "worker honest"]["payoff"] == pytest.approx(128 - 50)
    assert rows[0.0, 0, "validator lazy (one deviates)"]["gain_vs_honest"] > 0
    assert result["honest_check_best_response"] is False  # the verifier's dilemma at r = 0
    assert result["break_even"]["per_check"] == pytest.approx(2)  # at r = 0 a check must earn its whole cost
    assert result["parameters"]["check_cost"] == 2 and result["parameters"]["court"]["fee"] == 0.1


@pytest.mark.parametrize("argv", [
    ["--files", "x"], ["--files", "1"], ["--audit-rate", "1.5"], ["--cartel", "1"], ["--cartel", "-0.1"], ["--cheat-rate", "a"],
    ["--cheat-rate", "2"], ["--validators", "2"], ["--check-cost", "-1"], ["--cheater-share", "1"], ["--bogus"],
    ["--pool", "no/such/pool.toml"], ["--pool", str(ROOT / "examples" / "pool.toml")],
    ["--forced-bps", "1001"], ["--jackpot", "-1"], ["--forced-bps", "200", "--jackpot", "6401"],  # ρ·J > R = 128
])
def test_bad_flags_exit_2_with_one_line(argv, capsys) -> None:
    assert eco.main(argv) == EXIT_USAGE
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.splitlines()) == 1 and out.err.startswith("error: ")


def test_a_cell_without_a_fabricated_file_does_not_show_cheating_unprofitable() -> None:
    cells = [{"r": 0.001, "f": 0.0, "cartel": 0, "lazy_gain": 1.0, "honest_worker": 64.0, "cheater": math.nan,
              "checks_per_assigned_file": 1.0}]
    best_response, unprofitable, _ = eco.verdicts(cells)
    assert not best_response and not unprofitable


def test_forced_errors_settle_as_the_contract_at_r0(court) -> None:
    # every file forced (ρ = 1, a hand's case): an honest judge challenges each, takes J + b·S + fee and the worker is
    # refunded S and paid R, as for an honest file; a lazy one attests each, loses wrongVerdictSlash, and the worker,
    # paid R by the pool, loses S
    model = eco.Model(court, validators=5, audit_rate=0.0, check_cost=2.0, generation_cost=50.0, cheater_share=0.5,
                      forced_rate=1.0, jackpot=300.0)
    honest = eco.simulate(model, (eco.HONEST,) * 5, 0.0, 200, "f")
    assert honest.validator_pay.sum(axis=0) == pytest.approx((300 + court.bounty + court.fee - 2) * honest.assigned)
    assert honest.worker_pay == pytest.approx([court.reward - 50.0] * 200)  # generated, refunded and paid R here
    assert honest.counts["forced_caught"] == 200
    assert honest.counts["verification_outlay"] == pytest.approx(200 * (300 + court.slash + court.reward))
    lazy = eco.simulate(model, (eco.LAZY,) + (eco.HONEST,) * 4, 0.0, 200, "f")
    assert lazy.validator_pay[:, 0].sum() == pytest.approx((court.fee - court.wrong_verdict_slash) * lazy.assigned[0])
    mine = lazy.assignee == 0
    assert lazy.worker_pay[mine] == pytest.approx([court.reward - 50.0 - court.slash] * int(mine.sum()))


def test_a_drawn_auditor_that_lets_a_forced_error_stand_loses(court) -> None:
    # every file forced, every validator drawn to audit each: a lazy judge's attestation is disputed by the honest
    # auditors; with every validator lazy but one silent, nobody disputes and the silent one (drawn for every file,
    # its link withheld) loses wrongVerdictSlash on each accepted forced error it did not judge
    model = eco.Model(court, validators=3, audit_rate=1.0, check_cost=2.0, generation_cost=50.0, cheater_share=0.5,
                      forced_rate=1.0, jackpot=300.0)
    run = eco.simulate(model, (eco.LAZY, eco.LAZY, eco.SILENT), 0.0, 60, "a")
    assert run.counts["disputes"] == 0 and run.counts["forced_caught"] == 0
    silent_penalty = court.silence_penalty * run.assigned[2]
    others = 60 - run.assigned[2]  # the files a lazy validator judged; the silent one's go to a lazy stand-in
    assert run.validator_pay[:, 2].sum() == pytest.approx(-silent_penalty - court.wrong_verdict_slash * 60)
    assert others >= 0


def test_a_cartel_checks_outsiders_files_when_forced_errors_make_checking_pay(court) -> None:
    # ρ = 2 %, J = 1,000 and a check of 9.05: checking an outsider's file (−c + ρ·(J + b·S + fee) + (1 − ρ)·fee) beats
    # attesting it unchecked (fee − ρ·wrongVerdictSlash), so a cartel judges outsiders as an honest validator does and
    # an outsider's forced errors are caught: an honest outsider earns R − g under a cartel of 3 in 10, as with none
    model = eco.Model(court, validators=10, audit_rate=0.1, check_cost=9.05, generation_cost=64.0, cheater_share=0.5,
                      forced_rate=0.02, jackpot=1000.0)
    plan = eco.cartel_plan(model, (eco.CARTEL,) * 3 + (eco.HONEST,) * 7)
    check = -9.05 + 0.02 * (1000 + court.bounty + court.fee) + 0.98 * court.fee
    assert plan.values["check_outsider"] == pytest.approx(check, abs=1e-4)
    assert plan.values["attest_outsider"] == pytest.approx(court.fee - 0.02 * court.wrong_verdict_slash)
    assert plan.check_outsiders and not plan.challenge_outsiders
    run = eco.simulate(model, (eco.CARTEL,) * 3 + (eco.HONEST,) * 7, 0.0, 2000, "o")
    assert run.counts["forced"] > 0
    assert run.worker_pay[~run.ally] == pytest.approx([court.reward - 64.0] * int((~run.ally).sum()))
    # without forced errors a check of an outsider's file pays nothing: the cartel attests it unchecked
    assert not eco.cartel_plan(_model(court, 0.1), (eco.CARTEL,) * 3 + (eco.HONEST,) * 7).check_outsiders
