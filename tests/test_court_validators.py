"""Bonded validators who answer for their verdicts, end to end on a real anvil (1 s blocks) + Kubo with a
real (tiny) policy: three honest validator daemons and three dishonest ones (examples/adversaries/
validators.py: attest-all, challenge-all, silent) judge a worker's honest and fabricated files through the
ValidatorCourt; then, in a second pool, three honest validators, attest-all and random-vote, whose coin
says "valid" on the fabricated file it is drawn to judge as a committee member. Every dishonest validator loses stake, no honest party (validator or worker) loses any,
every fabricated file ends rejected and every honest one accepted, and the ComputePool only learns
verdicts that are final. A trainer waiting for finality never consumes a fabricated file; a fast one (the
devnet's mode) counts every fabricated file it consumed on attest-all's word as overturned."""

from __future__ import annotations

import contextlib
import functools
import threading
import time

import pytest

from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pool_cli import CourtConfig, create_pool
from examples.adversaries.validators import AttestEverything, ChallengeEverything, RandomVoter, Silent
from examples.adversaries.workers import fabricate_completions
from ledger_client.chain.ledger import Ledger, connect, save_deployment
from ledger_client.chain.queries import get_work, next_binding
from ledger_client.cli import EXIT_USAGE
from ledger_client.ipfs.content import publish_run_spec, put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.pool import CaseState, WorkStatus
from protocol.rollouts import encode_rollouts
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from tests.conftest_chain import TOKENS, pool_config
from trainer.ledger_source import LedgerSource
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import base_checkpoint_digest
from validator.checks import checker_process
from validator.cli import main as validator_main
from validator.court import Conduct, register_with_court
from validator.daemon import DaemonConfig, ValidatorDaemon
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
                                  reward_lock_s=301, task="0x" + publish_run_spec(self.kubo, SPEC).hex(),
                                  base_checkpoint="0x" + base.hex(), max_samples_per_work=None)
        self.deployments = tmp / "deployments.json"
        save_deployment(self.deployments, self.deployment)
        self.open_pool((*HONEST, *ADVERSARIES))

    def open_pool(self, validators: tuple[int, ...], court: CourtConfig = COURT) -> None:
        """A new court pool (it becomes `pool_id`) judged by the `validators` accounts; the worker joins it."""
        self.config = self.config.model_copy(update={"court": court})
        self.pool_id = create_pool(self.ledger(1), self.config, SPEC)
        for i in validators:
            register_with_court(self.ledger(i), self.pool_id)
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


@pytest.fixture(scope="module")
def court_pool(tmp_path_factory, kubo_node):
    p = CourtPool(tmp_path_factory.mktemp("court"), kubo_node)
    yield p
    p.close()


def test_a_validator_whose_fetches_outlast_the_dispute_window_is_refused(court_pool, capsys):
    # 35 s window < 20 s fetch + 30 s to send: it could never dispute a withheld file in time
    argv = ["start", "--pool", str(court_pool.pool_id), "--rpc-url", court_pool.anvil.rpc_url,
            "--deployments", str(court_pool.deployments), "--key", "0x" + bytes(court_pool.accounts[FOURTH_HONEST].key).hex(),
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
        assert after[i] >= before[i], f"honest validator {i} lost stake"
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
    honest_ids = {"0x" + w.hex() for w, h in works.items() if h}
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
    pool.open_pool(validators, COURT.model_copy(update={"commit_period_s": 20, "reveal_period_s": 60}))
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
    deadline = time.monotonic() + 6 * case_s
    with running([pool.daemon(i, Conduct()) for i in honest] + [pool.daemon(attest_all, AttestEverything())]):
        with running([random_voter()]):
            # every file is fabricated; the worker cannot choose its judge, so it submits until attest-all judges
            # one whose dispute committee (three of the four validators left) seats the random voter, which commits
            while time.monotonic() < deadline and not any(committed(w) for w in judged_by_attest_all):
                all_final = all(court.cases(w).state == CaseState.FINAL for w in judged_by_attest_all)
                if len(works) < 30 and all_final:
                    works.append(pool.submit(honest=False))
                for w in works:
                    if w not in judged_by_attest_all and court.assigned_validator(w) == pool.accounts[attest_all].address:
                        judged_by_attest_all.append(w)
                time.sleep(0.5)
        seated = [w for w in judged_by_attest_all if voter in court.committee_of(w)]
        assert any(committed(w) for w in seated), \
            f"the random voter committed no vote ({len(works)} files, {len(judged_by_attest_all)} judged by attest-all)"
        deadline = time.monotonic() + 2 * case_s
        with running([random_voter()]):  # the same state directory: the saved vote and salt
            while time.monotonic() < deadline and any(court.cases(w).state != CaseState.FINAL for w in works):
                time.sleep(1.0)
    ledger = pool.ledger(0)
    for w in works:
        assert court.cases(w).state == CaseState.FINAL and get_work(ledger, w).status == WorkStatus.REJECTED
    resolved = {bytes(e["args"]["workId"]): e["args"] for e in court.contract.events.DisputeResolved.get_logs(from_block=0)}
    assert all(resolved[w]["overturned"] for w in judged_by_attest_all)
    # the seeded coin's first votes say "valid" on fabricated files: revealed after the restart, in the minority
    assert all(court.votes(w, voter) == REVEALED_VALID for w in seated)
    after = {i: pool.locked(i) for i in validators}
    for i in honest:
        assert after[i] >= before[i], f"honest validator {i} lost stake"
    assert before[attest_all] - after[attest_all] == len(judged_by_attest_all) * COURT.wrong_verdict_slash
    assert before[RANDOM_VOTER] - after[RANDOM_VOTER] == len(seated) * COURT.non_voter_penalty
