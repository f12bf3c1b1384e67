"""A dispute whose committee reveals nothing is reopened with a new committee, up to DISPUTE_ROUNDS rounds,
end to end on a real anvil + Kubo with an honest validator daemon following each round (the court pool of
tests/support/court_pool.py)."""

from __future__ import annotations

import time

import pytest

from ledger_client.chain import errors
from ledger_client.chain.queries import get_work
from protocol.pool import CaseState, WorkStatus
from protocol.verdicts import Reason
from tests.support.court_pool import ADVERSARIES, COURT, HONEST, RANDOM_VOTER, court_pool, running  # noqa: F401 - court_pool: a fixture
from validator.court import Conduct


@pytest.mark.timeout(900)
def test_a_committee_that_reveals_nothing_is_redrawn_until_the_case_is_void(court_pool):
    """A wrong challenge of an honest file, disputed by an honest daemon; the only validators eligible for its
    committee (three registered accounts with no daemon) never vote. Each silent round reopens the dispute and
    the daemon follows it — draws the next committee, resolves again — until, after DISPUTE_ROUNDS rounds, the
    case is void: no verdict reaches the pool, the parties are freed, every silent member pays once per round."""
    pool = court_pool
    judge, auditor, silent = RANDOM_VOTER, HONEST[0], tuple(ADVERSARIES)
    # anvil's clock runs with the wall clock: the daemon, started after the challenge, must load its checker, audit
    # and dispute inside the dispute window, and draw each committee in the first half of a commit period. Beside
    # the heaviest modules that took more than 35 s and 5 s (the case went final, not void), so both windows are
    # bounds on a stall here, not paces: the daemon acts as soon as it can and the rounds take ~45 s each
    rules = COURT.model_copy(update={"assigned_window_s": 5, "verdict_window_s": 20, "dispute_window_s": 600,
                                     "commit_period_s": 30, "reveal_period_s": 10})
    pool.config = pool.config.model_copy(update={"challenge_window_s": 900, "reward_lock_s": 901})
    pool.open_pool((judge, auditor, *silent), rules)
    court = pool.ledger(0).court
    before = {i: pool.locked(i) for i in (judge, auditor)}
    work = pool.submit(honest=True)
    deadline = time.monotonic() + 10 * rules.verdict_window_s  # a loaded machine's bound; it usually takes ~6 s
    while True:  # the judge is assigned, or any validator of the set may judge once the assigned window is over
        try:
            pool.ledger(judge).court.challenge(work, int(Reason.SAMPLING), bytes(32))
            break
        except (errors.NotAssigned, errors.AssignmentNotDrawn) as exc:
            assert time.monotonic() < deadline, exc
            time.sleep(1.0)
    rounds = court.dispute_rounds()
    deadline = time.monotonic() + 4 * rules.decided_within_s() * rounds  # only a broken daemon waits this long
    with running([pool.daemon(auditor, Conduct())]):
        while time.monotonic() < deadline and court.cases(work).state not in (CaseState.VOID, CaseState.FINAL):
            time.sleep(1.0)
    assert court.cases(work).state == CaseState.VOID, "the wrong challenge went final: the daemon never disputed it"
    assert get_work(pool.ledger(0), work).status == WorkStatus.PENDING, "neither paid nor slashed"
    members = {pool.accounts[i].address for i in silent}
    committees = [e["args"]["committee"] for e in court.contract.events.CommitteeDrawn.get_logs(from_block=0)
                  if bytes(e["args"]["workId"]) == work]
    assert len(committees) == rounds and all(set(c) == members for c in committees)
    reopened = [e["args"]["round"] for e in court.contract.events.DisputeReopened.get_logs(from_block=0)
                if bytes(e["args"]["workId"]) == work]
    assert reopened == list(range(1, rounds))
    no_vote = [e["args"] for e in court.contract.events.ValidatorPenalized.get_logs(from_block=0)
               if bytes(e["args"]["workId"]) == work and e["args"]["why"] == 3]
    assert sorted(a["party"] for a in no_vote) == sorted(list(members) * rounds)
    assert all(a["amount"] == rules.non_voter_penalty for a in no_vote)
    assert pool.locked(judge) == before[judge], "void: the wrong challenge is not decided, its judge is freed"
    # the auditor's daemon starts after the verdict: if the draw assigned it the work, it paid for that silence
    assigned_to_auditor = court.assigned_validator(work) == pool.accounts[auditor].address
    silence = rules.silence_penalty if assigned_to_auditor else 0
    assert pool.locked(auditor) >= before[auditor] - silence, "the honest disputer loses nothing for its dispute"
    for i in (judge, auditor):
        assert court.get_validator(pool.pool_id, pool.accounts[i].address).reserved == 0
