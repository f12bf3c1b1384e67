"""A dispute whose committee reveals nothing is reopened with a new committee, up to DISPUTE_ROUNDS rounds,
end to end on a real anvil + Kubo with an honest validator daemon following each round (the court pool of
tests/support/court_pool.py), on the chain's clock: the test moves it once the daemon has done
what each phase asks, never on a timer."""

from __future__ import annotations

import threading
import time

import pytest

from ledger_client.chain.queries import get_work
from protocol.pool import CaseState, WorkStatus
from protocol.verdicts import Reason
from tests.support.court_pool import (ADVERSARIES, AHEAD_OF_THE_WALL_S, COURT, HONEST, RANDOM_VOTER,  # noqa: F401 - court_pool: a fixture
                                      chain_clock_held, court_pool, jump, running)
from validator.court import Conduct

@pytest.mark.timeout(900)
def test_a_committee_that_reveals_nothing_is_redrawn_until_the_case_is_void(court_pool):
    """A wrong challenge of an honest file, disputed by an honest daemon; the only validators eligible for its
    committee (three registered accounts with no daemon) never vote. Each silent round reopens the dispute and
    the daemon follows it — draws the next committee, resolves again — until, after DISPUTE_ROUNDS rounds, the
    case is void: no verdict reaches the pool, the parties are freed, every silent member pays once per round."""
    pool = court_pool
    judge, auditor, silent = RANDOM_VOTER, HONEST[0], tuple(ADVERSARIES)
    # the chain's clock moves only when this test moves it (chain_clock_held: a block per transaction, no timer), and
    # only once the daemon has done what the phase asks: it disputes inside the dispute window and draws each
    # committee inside the first half of a commit period however slow the machine, and nobody waits out a commit and
    # reveal period in wall seconds
    rules = COURT.model_copy(update={"assigned_window_s": 5, "verdict_window_s": 20, "commit_period_s": 30,
                                     "reveal_period_s": 10})
    pool.config = pool.config.model_copy(update={"challenge_window_s": 900, "reward_lock_s": 901})
    with chain_clock_held(pool.w3):
        pool.open_pool((judge, auditor, *silent), rules)
        court = pool.ledger(0).court
        before = {i: pool.locked(i) for i in (judge, auditor)}
        rounds = court.dispute_rounds()
        auditing = pool.daemon(auditor, Conduct())  # it runs from the challenge on; its checker starts meanwhile
        starting = threading.Thread(target=auditing.checkers.start)
        starting.start()
        try:
            # past the registrations' activation delay, and the chain's clock ahead of the wall's: the daemon's clock is
            # the later of the two (ChainClock.now), the chain's from here
            jump(pool.w3, int(time.time()) + AHEAD_OF_THE_WALL_S - pool.w3.eth.get_block("latest")["timestamp"])
            work = pool.submit(honest=True)
            while pool.w3.eth.block_number <= court.cases(work).submitted_block + 1:  # the assignment's draw block
                jump(pool.w3, 1)
            if court.assigned_validator(work) != pool.accounts[judge].address:
                jump(pool.w3, rules.assigned_window_s + 1)  # past the assignee's window: any validator of the set judges
            pool.ledger(judge).court.challenge(work, int(Reason.SAMPLING), bytes(32))
        except BaseException:
            starting.join()
            auditing.close()
            raise
        starting.join()
        with running([auditing]):
            while court.cases(work).state not in (CaseState.VOID, CaseState.FINAL):  # bounded by the timeout
                dispute, latest = court.disputes(work), pool.w3.eth.get_block("latest")
                if dispute.disputed_at and not dispute.drawn and latest["number"] <= dispute.dispute_block + 3:
                    jump(pool.w3, 1)  # the blocks a draw waits for (a follower's: two more), seconds into the period
                elif dispute.drawn:  # nobody on the committee reveals: past the reveal period, a block a look
                    jump(pool.w3, max(1, dispute.disputed_at + rules.commit_period_s + rules.reveal_period_s + 1
                                      - latest["timestamp"]))
                time.sleep(0.5)
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
