"""A court pool on a real anvil (1 s blocks) + Kubo with a real (tiny) policy, shared by the court tests:
validator daemons judge a worker's honest and fabricated files through the ValidatorCourt."""

from __future__ import annotations

import contextlib
import functools
import threading

import pytest

from adversaries.validators import AttestEverything, ChallengeEverything, Silent
from adversaries.workers import fabricate_completions
from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import CourtConfig, create_pool
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.chain.queries import next_binding
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.pool import CaseState
from protocol.digest import hex_text
from protocol.rollouts import encode_rollouts
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from tests.support.conftest_chain import TOKENS, pool_config
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest
from validator.checks import checker_process
from validator.court import OPEN_VERDICTS, Conduct, register_with_court
from validator.config import DaemonConfig
from validator.daemon import ValidatorDaemon
from worker.policy import Policy
from worker.produce import make_batch


SPEC = RunSpec(
    task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}},
    sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=8),
    prompts_per_submission=2,
    pool_seed="0x" + "6c" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                  toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True),
)
N = 8
# windows with room for a loaded machine (make test runs four modules at once on two cores): an honest
# validator that misses its assigned window pays the silence penalty, one that misses the dispute window
# lets a wrong verdict stand
COURT = CourtConfig(validator_bond=200 * TOKENS, verdict_fee=TOKENS, dispute_bond=20 * TOKENS,
                    wrong_verdict_slash=60 * TOKENS, non_voter_penalty=10 * TOKENS, silence_penalty=5 * TOKENS,
                    assigned_window_s=25, verdict_window_s=60, dispute_window_s=35, commit_period_s=15,
                    reveal_period_s=10, activation_delay_s=5, committee_size=3, fee_funding=100 * TOKENS)
HONEST, ADVERSARIES = (5, 6, 7), {8: AttestEverything(), 9: ChallengeEverything(), 10: Silent()}
WORKER = 4
RANDOM_VOTER, FOURTH_HONEST = 3, 12
RANDOM_VOTER_SEED = 4
"""random.Random(4)'s first three draws are < 0.5: the random voter's first votes say "valid"."""
REVEALED_VALID, REVEALED_INVALID = (1).to_bytes(32, "big"), (2).to_bytes(32, "big")
"""`ValidatorCourt.votes` once a vote is revealed."""


class CourtPool:
    def __init__(self, tmp, kubo_node):
        self.tmp = tmp
        self.anvil = start_anvil(tmp / "anvil.log", accounts=13, extra_args=["--block-time", "1"])
        self.w3 = connect(self.anvil.rpc_url, 31337)
        self.accounts = dev_accounts(13)
        self.deployment = deploy_contracts(self.w3, self.accounts[0], treasury=self.accounts[11].address)
        admin = self.ledger(0)
        for i in (1, WORKER, RANDOM_VOTER, FOURTH_HONEST, *HONEST, *ADVERSARIES):
            admin.token.mint(self.accounts[i].address, 10**6 * TOKENS)
        self.kubo_api = kubo_node.api_multiaddr
        self.kubo = KuboClient(self.kubo_api)
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
        base = base_checkpoint_digest(self.kubo, model.state_dict(), model.config, tokenizer)
        self.policy = Policy(0, base, model, tokenizer)
        self.config = pool_config(self.accounts, validators=[], court=COURT, challenge_window_s=300,
                                  reward_lock_s=301, task=hex_text(publish_run_spec(self.kubo, SPEC)),
                                  base_checkpoint=hex_text(base), max_samples_per_work=None)
        self.deployments = tmp / "deployments.json"
        save_deployment(self.deployments, self.deployment)
        self.open_pool((*HONEST, *ADVERSARIES))

    def open_pool(self, validators: tuple[int, ...], court: CourtConfig = COURT,
                  open_verdicts: int = OPEN_VERDICTS) -> None:
        """A new court pool (it becomes `pool_id`) judged by the `validators` accounts, each bonded for
        `open_verdicts` verdicts at once; the worker joins it."""
        self.config = self.config.model_copy(update={"court": court})
        self.pool_id = create_pool(self.ledger(1), self.config, SPEC)
        for i in validators:
            register_with_court(self.ledger(i), self.pool_id, open_verdicts)
        # a registration judges work submitted activation_delay_s after it: move the chain's clock past that
        self.w3.provider.make_request("evm_increaseTime", [court.activation_delay_s + 1])
        self.w3.provider.make_request("evm_mine", [])
        worker = self.ledger(WORKER)
        worker.ensure_allocation(self.pool_id, 60 * self.config.slash_amount)  # every submission backed up front
        worker.pool.join_pool(self.pool_id)

    def ledger(self, i: int) -> Ledger:
        return Ledger(self.w3, self.deployment, self.accounts[i])

    def daemon(self, i: int, conduct: Conduct, audit_rate: float = 1.0) -> ValidatorDaemon:
        state = self.tmp / f"validator-{i}-pool-{self.pool_id}"
        factory = functools.partial(checker_process, 1, self.anvil.rpc_url, str(self.deployments), self.kubo_api,
                                    self.pool_id, state / "cache")
        config = DaemonConfig(pool_id=self.pool_id, state_dir=state, kubo_api=self.kubo_api, poll_interval_s=0.3,
                              audit_rate=audit_rate)
        return ValidatorDaemon(self.ledger(i), config, factory, conduct=conduct)

    def submit(self, honest: bool) -> bytes:
        ledger = self.ledger(WORKER)
        binding = next_binding(ledger, self.pool_id)
        batch = make_batch(self.policy, SPEC, binding)
        if not honest:
            batch = fabricate_completions(self.policy, SPEC, batch, range(N))
        ledger.pool.submit_work(self.pool_id, binding.step, binding.nonce, put_object(self.kubo, encode_rollouts(batch)), N)
        return binding.work_id

    def locked(self, i: int) -> int:
        return self.ledger(0).court.get_validator(self.pool_id, self.accounts[i].address).locked

    def close(self) -> None:
        self.kubo.close()
        self.anvil.stop()


@contextlib.contextmanager
def running(daemons: list[ValidatorDaemon]):
    """The daemons judging in threads (their checker processes up before any file), stopped and closed after."""
    starting = [threading.Thread(target=d.checkers.start) for d in daemons]
    for t in starting:
        t.start()
    for t in starting:
        t.join()
    stop = threading.Event()
    threads = [threading.Thread(target=d.run, args=(stop,), daemon=True) for d in daemons]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for d in daemons:
            d.close()


AHEAD_OF_THE_WALL_S = 3600
"""Under `chain_clock_held`, the chain's clock is set this far past the wall clock's (more than a test's timeout): a
daemon takes the later of the two for the chain's time, so the wall clock must never overtake the held chain's."""


@contextlib.contextmanager
def chain_clock_held(w3):
    """The chain's clock moves only when the test moves it: no blocks on a timer, a block per transaction, each one
    second after the last (anvil's timestamp interval) — however slow the machine, a daemon driven poll by poll sees
    the chain time the test set (`jump`). Restores 1 s interval mining after, for the module's next test."""
    for method, params in (("evm_setIntervalMining", [0]), ("evm_setAutomine", [True]),
                           ("anvil_setBlockTimestampInterval", [1])):
        w3.provider.make_request(method, params)
    try:
        yield
    finally:
        for method, params in (("anvil_removeBlockTimestampInterval", []), ("evm_setAutomine", [False]),
                               ("evm_setIntervalMining", [1])):
            w3.provider.make_request(method, params)


def jump(w3, seconds: int) -> None:
    """Mine a block `seconds` after the latest one (under `chain_clock_held`, where evm_increaseTime does nothing)."""
    w3.provider.make_request("evm_mine", [w3.eth.get_block("latest")["timestamp"] + seconds])


@pytest.fixture(scope="module")
def court_pool(tmp_path_factory, kubo_node):
    p = CourtPool(tmp_path_factory.mktemp("court"), kubo_node)
    yield p
    p.close()


def end_settled_periods(w3, court, works: list[bytes], rules: CourtConfig, hold: str | None = None) -> None:
    """Move the chain's clock to the end of a committee's commit or reveal period once nothing is left to happen in it
    — every member has committed (commit period), or revealed or never committed (reveal period) — and only when every
    other open case of `works` is as settled: a case still pending or in its dispute window blocks it (a validator may
    still be checking), so no validator misses a phase it must act in, and nobody waits out a period that has nothing
    left in it. A committee that seats `hold` is left to the clock."""
    now = w3.eth.get_block("latest")["timestamp"]
    ends = []
    for work in works:
        state = court.cases(work).state
        if state in (CaseState.FINAL, CaseState.VOID):
            continue
        dispute = court.disputes(work) if state == CaseState.DISPUTED else None
        if dispute is None or not dispute.drawn:
            return
        members = court.committee_of(work)
        if hold in members:
            return
        votes = [bytes(court.votes(work, m)) for m in members]
        commit_end = dispute.disputed_at + rules.commit_period_s
        if now <= commit_end:
            if bytes(32) in votes:
                return
            ends.append(commit_end + 1)
        elif now <= commit_end + rules.reveal_period_s:
            if any(v not in (bytes(32), REVEALED_VALID, REVEALED_INVALID) for v in votes):
                return
            ends.append(commit_end + rules.reveal_period_s + 1)
        # past the reveal period: its resolve has no deadline
    if ends:
        w3.provider.make_request("evm_increaseTime", [min(ends) - now])
        w3.provider.make_request("evm_mine", [])
