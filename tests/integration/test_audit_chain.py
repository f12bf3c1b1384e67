"""A court validator's committed hash chain on real anvil (docs/protocol.md R9.25, R9.29): the daemon's `AuditChain`
commits it with the bond, records each epoch's beacon (a late anchor's too), reveals each epoch's link inside its
window, and its audit draw is the contract's `isAudited` for the same files; a restart with nothing but the key (no
state folder) recovers the secret and never reveals twice."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from web3 import Web3

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import CourtConfig, ForcedErrorsConfig, PoolConfig, create_pool
from ledger_client.chain.ledger import Ledger, connect
from protocol.hashchain import Role, drawn
from protocol.pool import CaseState
from protocol.verdicts import Reason
from tests.support.conftest_chain import TOKENS, pool_config
from validator.chains import AuditChain
from validator.court import CourtDuties, register_with_court
from validator.court_flow import stagger
from validator.keeper import Keeper
from worker.forced import ForcedErrorChain

EPOCH, WINDOW = 60, 30
FORCED = ForcedErrorsConfig(forced_bps=200, audit_bps=5000, epoch_length_s=EPOCH, reveal_window_s=WINDOW,
                            jackpot=1000 * TOKENS, validator_bond=100 * TOKENS, worker_bond=200 * TOKENS,
                            silence_penalty=10 * TOKENS, budget_funding=5000 * TOKENS)
FORCED_OFTEN = FORCED.model_copy(update={"forced_bps": 1000, "jackpot": 600 * TOKENS})
"""ρ = 10 % (ρ·J = 60 ≤ the largest file's reward, 64): a file owes a forced error within a few epochs."""
COURT = CourtConfig(validator_bond=200 * TOKENS, verdict_fee=TOKENS, dispute_bond=20 * TOKENS,
                    wrong_verdict_slash=60 * TOKENS, non_voter_penalty=10 * TOKENS, silence_penalty=5 * TOKENS,
                    assigned_window_s=25, verdict_window_s=60, dispute_window_s=35, commit_period_s=15,
                    reveal_period_s=10, activation_delay_s=5, committee_size=3, forced_errors=FORCED)
VALIDATOR, WORKER = 3, 4


def _warp_to(w3, t: int) -> None:
    now = w3.eth.get_block("latest")["timestamp"]
    if t > now:
        w3.provider.make_request("evm_increaseTime", [t - now])
    w3.provider.make_request("evm_mine", [])


def _reveals(ledger: Ledger, who: str) -> list[int]:
    events = ledger.logs.read(ledger.forced_errors.contract.events.LinkRevealed, {"account": who},
                              ledger.deployment.block, ledger.w3.eth.block_number)
    return [e["args"]["epoch"] for e in events]


class ForcedPool(NamedTuple):
    w3: Web3
    admin: Ledger
    validator: Ledger
    worker: Ledger
    pool_id: int
    cfg: PoolConfig
    rpc_url: str
    accounts: list
    deployment: object


@pytest.fixture
def forced_pool(request, tmp_path) -> Iterator[ForcedPool]:
    """A court pool with forced errors (FORCED, or the test's parameter) on a fresh anvil: its one validator
    registered, its one worker joined."""
    forced = getattr(request, "param", FORCED)
    anvil = start_anvil(tmp_path / "anvil.log")
    try:
        w3 = connect(anvil.rpc_url, 31337)
        accounts = dev_accounts(10)
        deployment = deploy_contracts(w3, accounts[0])
        admin = Ledger(w3, deployment, accounts[0])
        for i in (1, VALIDATOR, WORKER):
            admin.token.mint(accounts[i].address, 10**6 * TOKENS)
        cfg = pool_config(accounts, validators=[], court=COURT.model_copy(update={"forced_errors": forced}),
                          challenge_window_s=300, reward_lock_s=301)
        pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg)
        validator, worker = Ledger(w3, deployment, accounts[VALIDATOR]), Ledger(w3, deployment, accounts[WORKER])
        register_with_court(validator, pool_id)
        worker.ensure_allocation(pool_id, 40 * cfg.slash_amount)
        worker.pool.join_pool(pool_id)
        yield ForcedPool(w3, admin, validator, worker, pool_id, cfg, anvil.rpc_url, accounts, deployment)
    finally:
        anvil.stop()


def test_the_daemons_draw_is_the_contracts_and_a_restart_never_reveals_twice(forced_pool):
    w3, admin, validator, worker, pool_id, *_ = forced_pool
    fe = admin.forced_errors
    now = lambda: w3.eth.get_block("latest")["timestamp"]  # noqa: E731

    chain = AuditChain.of(validator, pool_id)
    assert chain is not None and chain.secret is None
    chain.tick(now())
    on_chain = fe.get_chain(pool_id, Role.VALIDATOR, validator.address)
    assert on_chain.locked == FORCED.validator_bond and chain.secret is not None
    first = on_chain.first_epoch

    _warp_to(w3, chain.genesis + first * EPOCH + 1)  # into the chain's first epoch
    assert chain.beacon(first) is None  # pending: nobody can draw for the epoch yet
    chain.tick(now())  # anchors the epoch's beacon, then records it from the next block (automining: at once)
    beacon = fe.get_beacon(pool_id, first)
    assert chain.beacon(first) == bytes(beacon.value) == bytes(w3.eth.get_block(beacon.anchor)["hash"])
    assert w3.eth.get_block(beacon.anchor)["timestamp"] >= chain.genesis + first * EPOCH  # a block of the epoch
    works = []
    for _ in range(12):
        nonce = worker.pool.get_member(pool_id, worker.address).next_nonce
        worker.pool.submit_work(pool_id, 0, nonce, os.urandom(32), 8)
        works.append(bytes(worker.pool.work_id_of(pool_id, worker.address, nonce)))
    ours = {w: chain.audits(w, admin.court.cases(w).submitted_at) for w in works}
    assert set(ours.values()) == {True, False}  # at auditBps 5000, 12 files: both outcomes (P(one) = 2^-11)

    opens, _ = chain.reveal_window(first)
    _warp_to(w3, opens)
    chain.tick(now())
    assert _reveals(admin, validator.address) == [first]
    assert {w: fe.is_audited(w, validator.address) for w in works} == ours  # the contract's rule, same draws
    link = fe.link_of(pool_id, Role.VALIDATOR, validator.address, first)
    for i in range(40):  # the pure draw is `ForcedErrors.drawn` on any input
        w, bps = os.urandom(32), int.from_bytes(os.urandom(2), "big") % 10_001
        b = os.urandom(32) if i % 2 else bytes(beacon.value)
        assert fe.drawn(link, b, w, bps) == drawn(link, b, w, bps)
        assert fe.drawn(link, b, w, 5_000) == drawn(link, b, w, 5_000)

    restarted = AuditChain.of(validator, pool_id)  # a kill -9: memory and state folder gone, the key kept
    assert restarted.secret == chain.secret
    restarted.tick(now())
    restarted.tick(now())
    assert _reveals(admin, validator.address) == [first]  # nothing revealed twice
    _warp_to(w3, restarted.reveal_window(first + 1)[0])
    AuditChain.of(validator, pool_id).tick(now())
    restarted.tick(now())  # the older instance's view is stale: the contract refuses, it re-reads
    assert _reveals(admin, validator.address) == [first, first + 1]

    # someone anchors an epoch's beacon in its last seconds and nobody records it in that epoch: the next tick,
    # in the epoch after, records it while the anchor's hash is readable (else the epoch would fall back to zero)
    late = chain.epoch(now()) + 1
    _warp_to(w3, chain.epoch_end(late) - 2)
    fe.record_beacon(pool_id, late)
    anchor = fe.get_beacon(pool_id, late).anchor
    _warp_to(w3, chain.epoch_end(late) + 1)
    chain.tick(now())
    assert bytes(fe.get_beacon(pool_id, late).value) == bytes(w3.eth.get_block(anchor)["hash"])


@pytest.mark.parametrize("forced_pool", [FORCED_OFTEN], indirect=True)
def test_a_validator_that_challenges_a_forced_error_settles_it_and_takes_the_jackpot(forced_pool, tmp_path):
    """The worker's own chain (the worker daemon's `ForcedErrorChain`) owes a forced error in its next file in some
    epoch — known only once that epoch's beacon is recorded (R9.29), so the worker looks epoch by epoch; submitted then,
    the assigned validator challenges it, the case is final, both reveal their links, and the validator's keeper (what
    its daemon runs each poll) pays it J; the worker is refunded its slash and paid the file's reward (R9.26)."""
    w3, admin, validator, worker, pool_id, cfg, *_ = forced_pool
    fe, court = admin.forced_errors, admin.court
    now = lambda: w3.eth.get_block("latest")["timestamp"]  # noqa: E731
    _warp_to(w3, now() + COURT.activation_delay_s + 1)

    chain = AuditChain.of(validator, pool_id)
    chain.tick(now())
    owing = ForcedErrorChain.of(worker, pool_id)  # the worker daemon's chain (worker.forced)
    owing.tick(now())
    first = max(chain.chain.first_epoch, owing.chain.first_epoch)
    # the first epoch in which the worker's next file owes a forced error (ρ = 10 %: its chain and the epoch's
    # beacon decide; before the beacon, what it owes cannot be known)
    nonce = worker.pool.get_member(pool_id, worker.address).next_nonce
    work_id = bytes(worker.pool.work_id_of(pool_id, worker.address, nonce))
    for epoch in range(first, chain.chain.end_epoch + 1):
        _warp_to(w3, chain.genesis + epoch * EPOCH + 1)
        with pytest.raises(ValueError):
            owing.owes(work_id, now())
        assert owing.wait_s(now()) == 0  # it recorded the beacon itself
        if owing.owes(work_id, now()):
            break
    else:
        raise AssertionError("no epoch of the chains owed a forced error in the file")
    worker.pool.submit_work(pool_id, 0, nonce, os.urandom(32), 8)
    submitted_at = court.cases(work_id).submitted_at
    for _ in range(2):
        w3.provider.make_request("evm_mine", [])
    assert court.assigned_validator(work_id) == validator.address
    validator.court.challenge(work_id, int(Reason.TOPLOC), os.urandom(32))
    duties = CourtDuties(tmp_path / "court.json")
    keeper = Keeper(chain, validator.court, duties.book, duties.save, validator.address, stagger)
    keeper.saw_verdict(work_id, submitted_at, validator.address, False)  # what its daemon's VerdictGiven books
    assert court.cases(work_id).state == CaseState.FINAL  # the court's only validator: final at once

    opens, closes = chain.reveal_window(epoch)
    _warp_to(w3, opens)
    assert chain.tick(now()) == [epoch] and owing.tick(now()) == [epoch]
    assert fe.is_forced(work_id)  # the contract's draw on the revealed link: the worker's own
    assert keeper.step(now())["settled"] == 0 and duties.book.settle  # the reveal window is open: not yet
    _warp_to(w3, closes + 1)
    balance = admin.token.balance_of(validator.address)
    assert keeper.step(now())["settled"] == 1 and not duties.book.settle  # the catcher settles at once
    assert fe.outcome_of(work_id) == 2  # Outcome.Forced
    assert fe.is_audited(work_id, validator.address) == drawn(
        fe.link_of(pool_id, Role.VALIDATOR, validator.address, epoch), fe.beacon_of(pool_id, epoch), work_id,
        FORCED_OFTEN.audit_bps)
    assert admin.token.balance_of(validator.address) == balance + FORCED_OFTEN.jackpot  # paid and withdrawn
    # the error was forced: the worker's slash refunded and the file's reward paid, as an honest file's (R9.28 (7))
    assert fe.credits(worker.address) == cfg.slash_amount + worker.pool.get_work(work_id).reward


KEEPER_FORCED = FORCED.model_copy(update={"forced_bps": 1000, "audit_bps": 10_000, "jackpot": 50 * TOKENS})
"""ρ = 10 % (the worker's next file owes a forced error within a few epochs), every validator drawn to audit every
file (so each one that let the error stand is chargeable), J = 50 ≤ the largest file's reward (64)."""
JUDGE_A, KEEPER, SILENT = 3, 5, 6


def _flow(ledger: Ledger, state_dir, pool_id: int):
    """The validator daemon's court flow (what `ValidatorDaemon` builds), without its checkers and IPFS: its events,
    follow-ups, hash chain and keeper run as in the daemon's poll."""
    from validator.config import DaemonConfig
    from validator.court import Conduct
    from validator.court_flow import ChainClock, CourtFlow
    from validator.metrics import Metrics
    from validator.retries import RetryBook

    config = DaemonConfig(pool_id=pool_id, state_dir=state_dir, kubo_api="/ip4/127.0.0.1/tcp/1")
    state_dir.mkdir(parents=True, exist_ok=True)
    return CourtFlow(ledger, ledger.court, config, Conduct(), Metrics(), RetryBook(state_dir / "retries.json"),
                     ChainClock(ledger), None, lambda *a: None)


def _poll(flow) -> None:
    """One poll of the daemon's court part: the court's events read, then `finish_poll` (duties, chain, keeper)."""
    latest = flow.ledger.w3.eth.get_block("latest")
    flow.clock.read(latest)
    flow.poll_events(latest)
    flow.finish_poll()
    flow.cursor_journal.commit(flow.cursor.state)


def test_a_keeper_settles_an_uncaught_forced_error_charges_its_lazy_auditors_and_reports_silence_once(tmp_path):
    """Three validators: one judges, one is the keeper (its daemon's court flow, polled), one commits a chain and never
    reveals. The worker omits a forced error it owes and the judge attests it: after the epoch's reveal window the
    keeper settles it — the worker loses S (it was paid the file's reward), the judge `wrongVerdictSlash` —, charges the drawn
    auditors that let it stand, and reports the silent validator once. A restart, and a restart from the state saved
    before the step (a kill -9 between the transactions and the save), send nothing more (R9.28)."""
    import shutil

    anvil = start_anvil(tmp_path / "anvil.log")
    try:
        w3 = connect(anvil.rpc_url, 31337)
        accounts = dev_accounts(10)
        deployment = deploy_contracts(w3, accounts[0])
        admin = Ledger(w3, deployment, accounts[0])
        for i in (1, JUDGE_A, WORKER, KEEPER, SILENT):
            admin.token.mint(accounts[i].address, 10**6 * TOKENS)
        court_cfg = COURT.model_copy(update={"forced_errors": KEEPER_FORCED})
        cfg = pool_config(accounts, validators=[], court=court_cfg, challenge_window_s=300, reward_lock_s=301)
        pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg)
        ledgers = {i: Ledger(w3, deployment, accounts[i]) for i in (JUDGE_A, KEEPER, SILENT)}
        for ledger in ledgers.values():
            register_with_court(ledger, pool_id)
        worker = Ledger(w3, deployment, accounts[WORKER])
        worker.ensure_allocation(pool_id, 4 * cfg.slash_amount)
        worker.pool.join_pool(pool_id)
        fe, court = admin.forced_errors, admin.court
        now = lambda: w3.eth.get_block("latest")["timestamp"]  # noqa: E731
        _warp_to(w3, now() + COURT.activation_delay_s + 1)

        chains = {i: AuditChain.of(ledger, pool_id) for i, ledger in ledgers.items()}
        for chain in chains.values():
            chain.tick(now())  # the silent validator commits (its bond locked) and will reveal nothing
        owing = ForcedErrorChain.of(worker, pool_id)
        owing.tick(now())
        keeper_state = tmp_path / "keeper"
        flow = _flow(ledgers[KEEPER], keeper_state, pool_id)
        first = max(owing.chain.first_epoch, *(c.chain.first_epoch for c in chains.values()))
        nonce = worker.pool.get_member(pool_id, worker.address).next_nonce
        work_id = bytes(worker.pool.work_id_of(pool_id, worker.address, nonce))
        for epoch in range(first, owing.chain.end_epoch + 1):  # what a file owes is known once its beacon is (R9.29)
            _warp_to(w3, owing.epoch_end(epoch) - EPOCH + 1)
            assert owing.wait_s(now()) == 0  # the worker recorded the epoch's beacon itself
            if owing.owes(work_id, now()):
                break
        else:
            raise AssertionError("no epoch of the chains owed a forced error in the file")

        _warp_to(w3, owing.epoch_end(epoch) - EPOCH + 1)
        worker.pool.submit_work(pool_id, 0, nonce, os.urandom(32), 8)  # owes a forced error and omits it
        for _ in range(2):
            w3.provider.make_request("evm_mine", [])
        by_address = {ledger.address: i for i, ledger in ledgers.items()}
        judge = by_address[court.assigned_validator(work_id)]
        ledgers[judge].court.attest(work_id)  # lazy: the forced error stands
        _poll(flow)  # the keeper sees the verdict: booked for its epoch
        assert work_id.hex() in flow.duties.book.settle
        _warp_to(w3, court.cases(work_id).verdict_at + COURT.dispute_window_s + 1)
        ledgers[judge].court.finalize(work_id)
        assert court.cases(work_id).state == CaseState.FINAL and court.cases(work_id).accepted

        opens, closes = owing.reveal_window(epoch)
        _warp_to(w3, opens)
        assert owing.tick(now()) == [epoch]
        for i in (JUDGE_A, KEEPER):
            if chains[i].chain.last_epoch < epoch:
                chains[i].tick(now())
        assert fe.is_forced(work_id)
        _poll(flow)  # inside the reveal window: nothing to settle yet
        assert fe.outcome_of(work_id) == 0

        locked = {a: admin.stake.locked_of(fe.address, a) for a in (worker.address, *by_address)}
        budget = fe.budget(pool_id)
        _warp_to(w3, closes + 20)  # past the window and every validator's grace
        saved = tmp_path / "saved"
        shutil.copytree(keeper_state, saved)  # the state as before the keeper's step
        keeper_nonce = w3.eth.get_transaction_count(ledgers[KEEPER].address)
        _poll(flow)

        assert fe.outcome_of(work_id) == 2  # Outcome.Forced
        assert admin.stake.locked_of(fe.address, worker.address) == locked[worker.address] - cfg.slash_amount
        slash = COURT.wrong_verdict_slash
        auditors = {a for a in by_address if a != ledgers[judge].address and a != ledgers[KEEPER].address}
        silent = ledgers[SILENT].address
        penalized = {(e["args"]["account"], e["args"]["why"]): e["args"]["amount"] for e in admin.logs.read(
            fe.contract.events.Penalized, {"poolId": pool_id}, deployment.block, w3.eth.block_number)}
        assert penalized[worker.address, 3] == cfg.slash_amount  # an accepted forced error: S (the pool paid R)
        assert penalized[ledgers[judge].address, 1] == slash  # the judge that attested it
        for a in auditors:
            assert penalized[a, 2] == slash  # drawn auditors that let it stand (the silent one counts as drawn)
        assert penalized[silent, 5] == KEEPER_FORCED.silence_penalty  # reported once
        sent = w3.eth.get_transaction_count(ledgers[KEEPER].address) - keeper_nonce
        assert sent == 1 + len(auditors) + 1  # settle, the charges, the report
        for a in by_address:  # each validator's bond here lost exactly what it was penalized
            lost = sum(amount for (who, _), amount in penalized.items() if who == a)
            assert admin.stake.locked_of(fe.address, a) == locked[a] - lost
        assert fe.budget(pool_id) == budget + sum(penalized.values())
        assert not flow.duties.book.settle and not flow.duties.book.charge and not flow.duties.book.silence

        done = w3.eth.get_transaction_count(ledgers[KEEPER].address)
        _poll(flow)
        flow.cursor_journal.close()
        _poll(_flow(ledgers[KEEPER], keeper_state, pool_id))  # a restart
        shutil.rmtree(keeper_state)
        shutil.copytree(saved, keeper_state)
        again = _flow(ledgers[KEEPER], keeper_state, pool_id)  # a kill -9 after the sends, before the save
        _poll(again)
        assert w3.eth.get_transaction_count(ledgers[KEEPER].address) == done  # nothing sent twice
        assert not again.duties.book.settle and not again.duties.book.charge and not again.duties.book.silence
        reports = [e for e in admin.logs.read(fe.contract.events.Penalized, {"poolId": pool_id}, deployment.block,
                                              w3.eth.block_number) if e["args"]["why"] == 5]
        assert len(reports) == 1
    finally:
        anvil.stop()


def test_a_chain_bond_is_refused_in_one_line_while_locked_and_returned_once_its_chain_is_settled(forced_pool, tmp_path):
    """`validator withdraw --chain-bond` and `worker deallocate --chain-bond` (`withdrawBond`): refused before any
    transaction while the chain's last epoch is not settled, with the date and the seconds left; after it, the bond
    returns to free bonded stake (tokens for people, base units in --json)."""
    import json
    import re

    from ledger_client.chain.ledger import save_deployment

    w3, admin, validator, worker, pool_id, cfg, rpc_url, accounts, deployment = forced_pool
    now = lambda: w3.eth.get_block("latest")["timestamp"]  # noqa: E731
    audit, owing = AuditChain.of(validator, pool_id), ForcedErrorChain.of(worker, pool_id)
    audit.tick(now())
    owing.tick(now())
    deployments = tmp_path / "deployments.json"
    save_deployment(deployments, deployment)

    def run(command: str, i: int, *args: str) -> tuple[int, str, str]:
        """The installed command in a process of its own, as a person runs it: what it writes on stderr is its
        alone (in-process, a logging handler an earlier test's CLI left behind added lines to it)."""
        chain_args = ["--rpc-url", rpc_url, "--deployments", str(deployments),
                      "--key", accounts[i].key.to_0x_hex()]
        done = subprocess.run([str(Path(sys.executable).parent / command), args[0], *chain_args, "--pool",
                               str(pool_id), "--chain-bond", *args[1:]], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr

    nonce = w3.eth.get_transaction_count(validator.address)
    code, _, err = run("validator", VALIDATOR, "withdraw")
    (line,) = err.strip().splitlines()
    ready = admin.forced_errors.settled_by(pool_id, audit.chain.end_epoch) + 1
    assert code == 1 and "Traceback" not in err and "100 tokens" in line and "UTC" in line
    assert re.search(rf"\(in {ready - now()} s;", line), line
    assert w3.eth.get_transaction_count(validator.address) == nonce  # refused before any transaction

    _warp_to(w3, max(ready, admin.forced_errors.settled_by(pool_id, owing.chain.end_epoch) + 1))
    bonded = admin.stake.bonded_of(validator.address)
    code, out, _ = run("validator", VALIDATOR, "withdraw")
    assert code == 0 and "chain_bond_withdrawn  100 tokens" in out
    assert admin.stake.bonded_of(validator.address) == bonded + FORCED.validator_bond
    code, out, _ = run("worker", WORKER, "deallocate", "--json")
    assert code == 0 and json.loads(out)["chain_bond_withdrawn"] == str(FORCED.worker_bond)
    assert admin.forced_errors.get_chain(pool_id, Role.WORKER, worker.address).locked == 0
    code, _, err = run("worker", WORKER, "deallocate")  # nothing left: one line
    assert code == 2 and err.strip().count("\n") == 0 and "no worker hash-chain bond" in err
