"""A forced error end to end (docs/protocol.md R9.25–R9.26), on a real anvil (1 s blocks) + Kubo with a real (tiny)
policy: in a court pool with forced errors, the worker daemon's chain and the epoch's beacon (R9.29) say its next file
owes one, the daemon plants it
and submits it (`submit_one`), an honest validator daemon challenges it with its own checks, both reveal their links,
and the validator's daemon settles it: the jackpot is paid to its wallet, and the worker daemon withdraws its refunded
slash and the file's reward, not counting the challenge toward --max-restakes."""

from __future__ import annotations

import threading
import time

import pytest

from ledger_client.chain.queries import next_binding
from protocol.hashchain import Role
from protocol.pool import CaseState
from protocol.rollouts import decode_rollouts, encode_rollouts
from tests.support.court_pool import COURT, HONEST, N, SPEC, WORKER, court_pool, running  # noqa: F401 - a fixture
from deploy.pools import ForcedErrorsConfig
from validator.court import Conduct
from worker.daemon import WorkerDaemon, WorkerOptions
from worker.forced import ForcedErrorChain
from worker.produce import make_batch

TOKENS = 10**18
EPOCH, WINDOW = 60, 60
FORCED = ForcedErrorsConfig(forced_bps=1000, audit_bps=5000, epoch_length_s=EPOCH, reveal_window_s=WINDOW,
                            jackpot=80 * TOKENS, validator_bond=100 * TOKENS, worker_bond=100 * TOKENS,
                            silence_penalty=10 * TOKENS, budget_funding=1000 * TOKENS)
"""ρ = 10 %, J = 80: ρ·J = 8 ≤ the file's reward (8 completions × 1 token)."""
WAIT_S = 240
"""Only a broken daemon waits this long for what it does at its next poll."""


def _until(what: str, done) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"waited {WAIT_S} s for {what}"
        time.sleep(0.5)


def _warp_to(w3, t: int) -> None:
    now = w3.eth.get_block("latest")["timestamp"]
    if t > now:
        w3.provider.make_request("evm_increaseTime", [t - now])
    w3.provider.make_request("evm_mine", [])


@pytest.mark.timeout(900)
def test_an_honest_validator_challenges_a_planted_forced_error_and_its_daemon_takes_the_jackpot(court_pool, tmp_path):
    pool = court_pool
    judge = HONEST[0]
    pool.open_pool((judge,), COURT.model_copy(update={"forced_errors": FORCED}))
    w3, pid = pool.w3, pool.pool_id
    admin, worker, validator = pool.ledger(0), pool.ledger(WORKER), pool.accounts[judge].address
    fe, court = admin.forced_errors, admin.court
    now = lambda: w3.eth.get_block("latest")["timestamp"]  # noqa: E731
    made: list[bytes] = []

    def produce(policy, spec, binding):
        made.append(encode_rollouts(make_batch(policy, spec, binding)))
        return made[-1], N

    contributor = WorkerDaemon(worker, WorkerOptions(pool_id=pid, kubo_api=pool.kubo_api, work_dir=tmp_path / "worker",
                                                     max_restakes=0), producer=produce, loader=None)
    contributor.prepare()  # the run spec read, the pool joined, its chain committed: the worker bond locked
    contributor.policy = pool.policy  # what its loader would load from the pool's base checkpoint
    owing = contributor.chain
    assert isinstance(owing, ForcedErrorChain) and contributor.spec == SPEC
    assert fe.get_chain(pid, Role.WORKER, worker.address).locked == FORCED.worker_bond
    daemon = pool.daemon(judge, Conduct())
    with running([daemon]):
        _until("the validator daemon's chain", lambda: fe.get_chain(pid, Role.VALIDATOR, validator).end_epoch)
        audit = fe.get_chain(pid, Role.VALIDATOR, validator)
        binding = next_binding(worker, pid)
        start = max(audit.first_epoch, owing.chain.first_epoch)
        # what the file owes in an epoch is known only once that epoch's beacon is recorded: look epoch by epoch
        for epoch in range(start, min(audit.end_epoch, owing.chain.end_epoch) + 1):
            _warp_to(w3, owing.epoch_end(epoch) - EPOCH + 1)
            _until("the epoch's beacon", lambda: owing.wait_s(now()) == 0)  # recorded by whichever daemon came first
            if owing.owes(binding.work_id, now()):
                break
        else:
            raise AssertionError("no epoch of the chains owed a forced error in the file")
        assert next_binding(worker, pid) == binding  # the same file, whenever it is made

        contributor.submit_one(binding, threading.Event())  # made, planted (its chain says it owes), uploaded, sent
        assert contributor.stats.forced_errors == 1 and contributor.journal.entries()[0]["forced"]
        sent = decode_rollouts(next((tmp_path / "worker" / "rollouts").glob("*.parquet")).read_bytes())
        honest = decode_rollouts(made[0])
        assert sent.samples[1:] == honest.samples[1:] and sent.samples[0] != honest.samples[0]
        assert owing.epoch(court.cases(binding.work_id).submitted_at) == epoch
        _until("the challenge", lambda: court.cases(binding.work_id).state == CaseState.FINAL)
        assert not court.cases(binding.work_id).accepted  # the validator's checks caught it
        contributor._challenged(binding.work_id)  # what its verdict watch does: an owed error is no fault of its own
        assert contributor.stats.challenges == []  # --max-restakes 0 would have stopped it otherwise

        opens, closes = owing.reveal_window(epoch)
        _warp_to(w3, opens)
        assert owing.tick(now()) == [epoch]
        _until("the validator's reveal", lambda: fe.link_of(pid, Role.VALIDATOR, validator, epoch) != bytes(32))
        balance = admin.token.balance_of(validator)
        _warp_to(w3, closes + 1)
        _until("the settlement", lambda: admin.token.balance_of(validator) == balance + FORCED.jackpot)
    wallet = admin.token.balance_of(worker.address)
    contributor._withdraw_refunds()  # with its claims
    reward = admin.pool.get_work(binding.work_id).reward  # a caught forced error earns what an honest file does
    assert admin.token.balance_of(worker.address) == wallet + pool.config.slash_amount + reward
    assert fe.outcome_of(binding.work_id) == 2  # Outcome.Forced
    assert daemon.court_flow.duties.book.settle == {}
