"""A court validator's committed hash chain on real anvil (docs/protocol.md R9.25, R9.29): the daemon's `AuditChain`
commits it with the bond, records each epoch's beacon (a late anchor's too), reveals each epoch's link inside its
window, and its audit draw is the contract's `isAudited` for the same files; a restart with nothing but the key (no
state folder) recovers the secret and never reveals twice."""

from __future__ import annotations

import os

import pytest

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import CourtConfig, ForcedErrorsConfig, create_pool
from ledger_client.chain.ledger import Ledger, connect
from protocol.hashchain import Role, drawn
from protocol.pool import CaseState
from protocol.verdicts import Reason
from tests.support.conftest_chain import TOKENS, pool_config
from validator.chains import AuditChain
from validator.court import register_with_court
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


def test_the_daemons_draw_is_the_contracts_and_a_restart_never_reveals_twice(tmp_path):
    anvil = start_anvil(tmp_path / "anvil.log")
    try:
        w3 = connect(anvil.rpc_url, 31337)
        accounts = dev_accounts(10)
        deployment = deploy_contracts(w3, accounts[0])
        admin = Ledger(w3, deployment, accounts[0])
        for i in (1, VALIDATOR, WORKER):
            admin.token.mint(accounts[i].address, 10**6 * TOKENS)
        cfg = pool_config(accounts, validators=[], court=COURT, challenge_window_s=300, reward_lock_s=301)
        pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg)
        validator, worker = Ledger(w3, deployment, accounts[VALIDATOR]), Ledger(w3, deployment, accounts[WORKER])
        register_with_court(validator, pool_id)
        worker.ensure_allocation(pool_id, 40 * cfg.slash_amount)
        worker.pool.join_pool(pool_id)
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
    finally:
        anvil.stop()


def test_a_validator_that_challenges_a_forced_error_settles_it_and_takes_the_jackpot(tmp_path):
    """The worker's own chain (the worker daemon's `ForcedErrorChain`) owes a forced error in its next file in some
    epoch — known only once that epoch's beacon is recorded (R9.29), so the worker looks epoch by epoch; submitted then,
    the assigned validator challenges it, the case is final, both reveal their links, and the validator's
    `AuditChain.settle` (what its daemon runs each poll) pays it J; the worker is refunded its slash (R9.26)."""
    anvil = start_anvil(tmp_path / "anvil.log")
    try:
        w3 = connect(anvil.rpc_url, 31337)
        accounts = dev_accounts(10)
        deployment = deploy_contracts(w3, accounts[0])
        admin = Ledger(w3, deployment, accounts[0])
        for i in (1, VALIDATOR, WORKER):
            admin.token.mint(accounts[i].address, 10**6 * TOKENS)
        cfg = pool_config(accounts, validators=[], court=COURT.model_copy(update={"forced_errors": FORCED_OFTEN}),
                          challenge_window_s=300, reward_lock_s=301)
        pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg)
        validator, worker = Ledger(w3, deployment, accounts[VALIDATOR]), Ledger(w3, deployment, accounts[WORKER])
        register_with_court(validator, pool_id)
        worker.ensure_allocation(pool_id, 4 * cfg.slash_amount)
        worker.pool.join_pool(pool_id)
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
        owed = {work_id.hex(): [submitted_at, validator.address, "0x" + "00" * 20]}  # what its daemon books
        assert court.cases(work_id).state == CaseState.FINAL  # the court's only validator: final at once

        opens, closes = chain.reveal_window(epoch)
        _warp_to(w3, opens)
        assert chain.tick(now()) == [epoch] and owing.tick(now()) == [epoch]
        assert fe.is_forced(work_id)  # the contract's draw on the revealed link: the worker's own
        assert chain.settle(owed, now()) == 0 and owed  # the reveal window is open: not yet
        _warp_to(w3, closes + 1)
        balance = admin.token.balance_of(validator.address)
        assert chain.settle(owed, now()) == 1 and not owed
        assert fe.outcome_of(work_id) == 2  # Outcome.Forced
        assert fe.is_audited(work_id, validator.address) == drawn(
            fe.link_of(pool_id, Role.VALIDATOR, validator.address, epoch), fe.beacon_of(pool_id, epoch), work_id,
            FORCED_OFTEN.audit_bps)
        assert admin.token.balance_of(validator.address) == balance + FORCED_OFTEN.jackpot  # paid and withdrawn
        assert fe.credits(worker.address) == cfg.slash_amount  # the worker's slash refunded: the error was forced
    finally:
        anvil.stop()
