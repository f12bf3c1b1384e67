"""Bonded validators who answer for their verdicts, end to end on a real anvil (1 s blocks) + Kubo with a
real (tiny) policy: three honest validator daemons and three dishonest ones (adversaries/
validators.py: attest-all, challenge-all, silent) judge a worker's honest and fabricated files through the
ValidatorCourt; then, in a second pool, three honest validators, attest-all and random-vote, whose coin
says "valid" on the fabricated file it is drawn to judge as a committee member. Every dishonest validator loses stake, no honest party (validator or worker) loses any,
every fabricated file ends rejected and every honest one accepted, and the ComputePool only learns
verdicts that are final. A trainer waiting for finality (the default) consumes exactly the honest files, nothing
unaccepted and nothing overturned; a fast one (the opt-in --no-wait-final) counts every fabricated file it consumed
on attest-all's word as overturned."""

from __future__ import annotations

import time

import pytest

from adversaries.validators import AttestEverything, RandomVoter
from cli.errors import EXIT_USAGE
from ledger_client.chain.queries import get_work
from protocol.digest import WorkId, hex_text
from protocol.pool import CaseState, WorkStatus
from tests.support.court_pool import (ADVERSARIES, COURT, FOURTH_HONEST, HONEST, RANDOM_VOTER, RANDOM_VOTER_SEED, REVEALED_INVALID,
                              REVEALED_VALID, court_pool,  # noqa: F401 - court_pool: a fixture
                              end_settled_periods, running)
from trainer.ledger_source import LedgerSource
from validator.cli import main as validator_main
from validator.court import Conduct, validator_status


def test_a_validator_whose_fetches_outlast_the_dispute_window_is_refused(court_pool, capsys):
    # 35 s window < 20 s fetch + 30 s to send: it could never dispute a withheld file in time
    argv = ["start", "--pool", str(court_pool.pool_id), "--rpc-url", court_pool.anvil.rpc_url,
            "--deployments", str(court_pool.deployments), "--key", hex_text(court_pool.accounts[FOURTH_HONEST].key),
            "--kubo-api", court_pool.kubo_api, "--state-dir", str(court_pool.tmp / "refused")]
    assert validator_main(argv) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dispute window (35 s) is shorter than --fetch-timeout (20 s)" in err[0]
    assert court_pool.ledger(0).court.get_validator(court_pool.pool_id, court_pool.accounts[FOURTH_HONEST].address).index == 0
    assert not (court_pool.tmp / "refused").exists()


def test_dishonest_validators_lose_stake_and_honest_parties_lose_nothing(court_pool):
    pool = court_pool
    address = {pool.accounts[i].address: i for i in (*HONEST, *ADVERSARIES)}
    before = {i: pool.locked(i) for i in address.values()}
    daemons = [pool.daemon(i, Conduct()) for i in HONEST] + [pool.daemon(i, c) for i, c in ADVERSARIES.items()]
    works: dict[bytes, bool] = {}
    unassigned: list[bytes] = []
    # attest-all must judge a fabricated file, challenge-all an honest one, silent any: the worker cannot know
    # who will judge its file (the hash of the next block decides), so it submits until each has happened
    needed = {8: False, 9: True, 10: None}
    court = pool.ledger(0).court
    sources = fast, final = [LedgerSource(pool.ledger(0), pool.kubo, pool.pool_id, wait_final=w) for w in (False, True)]
    with running(daemons):
        while needed and len(works) < 60:
            fast.poll()  # as a trainer does, while work comes in: attest-all's word is taken before any dispute
            wants = {h for h in needed.values() if h is not None} or {True}
            honest = True if wants == {True} else False if wants == {False} else len(works) % 2 == 0
            work_id = pool.submit(honest)
            works[work_id] = honest
            unassigned.append(work_id)
            for w in list(unassigned):
                if (who := court.assigned_validator(w)) == "0x" + "00" * 20:
                    continue
                unassigned.remove(w)
                judge = address.get(who)
                if judge in needed and needed[judge] in (None, works[w]):
                    needed.pop(judge)
        assert not needed, f"no fitting assignment in {len(works)} submissions for {sorted(needed)}"
        court = pool.ledger(0).court
        deadline = time.monotonic() + 3 * COURT.decided_within_s()  # only a broken court waits this long
        while time.monotonic() < deadline and any(court.cases(w).state != CaseState.FINAL for w in works):
            for source in sources:
                source.poll()
            time.sleep(1.0)
        for source in sources:
            source.poll()
    ledger = pool.ledger(0)
    for work_id, honest in works.items():
        assert ledger.court.cases(work_id).state == CaseState.FINAL
        expected = WorkStatus.ACCEPTED if honest else WorkStatus.REJECTED
        assert get_work(ledger, work_id).status == expected, f"{'honest' if honest else 'fabricated'} work"
    after = {i: pool.locked(i) for i in address.values()}
    for i in HONEST:
        assert after[i] >= before[i], \
            f"honest validator {i} lost stake: {validator_status(pool.ledger(i), pool.pool_id)['penalties']}"
    for i in ADVERSARIES:
        assert after[i] < before[i], f"{ADVERSARIES[i].name} lost nothing"
    assert before[8] - after[8] >= COURT.wrong_verdict_slash
    assert before[9] - after[9] >= COURT.wrong_verdict_slash
    assert before[10] - after[10] >= COURT.silence_penalty
    n_bad = sum(not h for h in works.values())
    challenged = ledger.pool.contract.events.WorkChallenged.get_logs(from_block=0)
    assert sorted(bytes(e["args"]["workId"]) for e in challenged) == sorted(w for w, h in works.items() if not h)
    assert sum(e["args"]["slashed"] for e in challenged) == n_bad * pool.config.slash_amount  # never an honest file
    credits = {i: ledger.court.credits(pool.accounts[i].address) for i in HONEST}
    assert sum(credits.values()) > 0, "honest validators were paid fees and shares"
    honest_ids = {WorkId(w).text for w, h in works.items() if h}
    assert set(final.consumed) == honest_ids and final.unsettled == [] and final.overturned == []
    assert honest_ids <= set(fast.consumed) and fast.unsettled == []
    assert sorted(fast.overturned) == sorted(w for w in fast.consumed if w not in honest_ids)
    print(f"\nfast trainer consumed {len(fast.consumed)}, of which overturned {len(fast.overturned)}")


@pytest.mark.timeout(1500)
def test_a_random_voter_in_the_minority_loses_the_committee_penalty(court_pool):
    """Attest-all accepts a fabricated file, an honest auditor disputes it, and a committee of three is drawn
    from the other three honest validators and random-vote (which audits nothing, so it is never the
    disputer). Where its coin says "valid" it votes with the minority and loses exactly the committee
    penalty; the honest majority overturns the verdict and nobody honest loses anything. Random-vote's
    daemon is restarted between its commit and its reveal: the vote saved before the commit is revealed."""
    pool = court_pool
    honest, attest_all = (*HONEST, FOURTH_HONEST), 8
    validators = (*honest, attest_all, RANDOM_VOTER)
    # periods that bound a stall, not paces: the test moves the chain's clock to a period's end once every member has
    # committed or revealed (end_settled_periods); the reveal period spans the voter's restart (a checker's start-up:
    # minutes on a loaded machine, where a 60 s period ran out before the saved vote was revealed)
    rules = COURT.model_copy(update={"commit_period_s": 60, "reveal_period_s": 480})
    pool.config = pool.config.model_copy(update={"challenge_window_s": 900, "reward_lock_s": 901})
    pool.open_pool(validators, rules)
    court = pool.ledger(0).court
    before = {i: pool.locked(i) for i in validators}
    voter = pool.accounts[RANDOM_VOTER].address
    random_voter = lambda: pool.daemon(RANDOM_VOTER, RandomVoter(seed=RANDOM_VOTER_SEED), audit_rate=0.0)  # noqa: E731
    committed = lambda w: court.votes(w, voter) not in (bytes(32), REVEALED_VALID, REVEALED_INVALID)  # noqa: E731
    judged_by_attest_all: list[bytes] = []
    works: list[bytes] = []
    case_s = pool.config.court.decided_within_s()
    # bounds that only a broken court reaches (a passing run leaves each loop as soon as it can): six disputed
    # cases one after another to seat the voter (each seats it with probability 3/4), then one whole case after
    # its commit; the test's timeout covers both
    with running([pool.daemon(i, Conduct()) for i in honest] + [pool.daemon(attest_all, AttestEverything())]):
        with running([random_voter()]):
            deadline = time.monotonic() + 6 * case_s  # from when every daemon is up, not before their start-up
            # every file is fabricated; the worker cannot choose its judge, so it submits until attest-all judges
            # one whose dispute committee (three of the four validators left) seats the random voter, which commits
            while time.monotonic() < deadline and not any(committed(w) for w in judged_by_attest_all):
                all_final = all(court.cases(w).state == CaseState.FINAL for w in judged_by_attest_all)
                if len(works) < 30 and all_final:
                    works.append(pool.submit(honest=False))
                for w in works:
                    if w not in judged_by_attest_all and court.assigned_validator(w) == pool.accounts[attest_all].address:
                        judged_by_attest_all.append(w)
                end_settled_periods(pool.w3, court, works, rules, hold=voter)  # its commit, then its restart
                time.sleep(0.5)
        seated = [w for w in judged_by_attest_all if voter in court.committee_of(w)]
        committed_before_restart = [w for w in seated if committed(w)]
        assert committed_before_restart, \
            f"the random voter committed no vote ({len(works)} files, {len(judged_by_attest_all)} judged by attest-all)"
        deadline = time.monotonic() + 2 * case_s
        with running([random_voter()]):  # the same state directory: the saved vote and salt
            while time.monotonic() < deadline and any(court.cases(w).state != CaseState.FINAL for w in works):
                end_settled_periods(pool.w3, court, works, rules)
                time.sleep(1.0)
    ledger = pool.ledger(0)
    for w in works:
        assert court.cases(w).state == CaseState.FINAL and get_work(ledger, w).status == WorkStatus.REJECTED
    resolved = {bytes(e["args"]["workId"]): e["args"] for e in court.contract.events.DisputeResolved.get_logs(from_block=0)}
    assert all(resolved[w]["overturned"] for w in judged_by_attest_all)
    # the seeded coin's first votes say "valid" on fabricated files: revealed after the restart, in the minority.
    # A seat taken later (while the voter restarts, it can miss that commit period; the restarted coin starts over)
    # is whatever the coin or silence made it: the voter loses the penalty on every seat but a majority vote
    votes = {w: bytes(court.votes(w, voter)) for w in seated}
    assert all(votes[w] == REVEALED_VALID for w in committed_before_restart)
    lost_seats = sum(v != REVEALED_INVALID for v in votes.values())
    after = {i: pool.locked(i) for i in validators}
    for i in honest:
        assert after[i] >= before[i], f"honest validator {i} lost stake"
    assert before[attest_all] - after[attest_all] == len(judged_by_attest_all) * COURT.wrong_verdict_slash
    assert before[RANDOM_VOTER] - after[RANDOM_VOTER] == lost_seats * COURT.non_voter_penalty
