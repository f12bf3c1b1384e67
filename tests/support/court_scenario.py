"""One small real court run for the explorer's tests: anvil (a block per transaction, the clock moved by
`evm_increaseTime`) and Kubo, the ValidatorCourt driven by direct transactions from five bonded validators
and one worker, every path a case can take:

  accepted  the assigned validator attests; final after the dispute window; the worker claims (paid)
  toploc    the assigned validator challenges with a TOPLOC evidence document (spot check q = 50 %): every drawn
            completion fails, the first with a chunk that matched no exponent (the proof's sentinel)
  overturn  the assigned validator attests a fabricated file ("attest-all"); another disputes with a REWARD
            evidence document; the committee votes 2–1 that the work is invalid (the minority voter loses the
            committee penalty); the judge loses the wrong-verdict slash; the worker is slashed (DISPUTE)
  standin   the assigned validator stays silent past its window; another attests and takes its silence penalty
  lapsed    nobody judges: the case is voided, the silent assignee's penalty goes to the fee budget, the
            work expires in the pool

then one validator deregisters and withdraws its bond and fees, and the worker unbonds and withdraws free
stake (StakeManager's `Withdrawn`). Built in a few seconds; `CourtRun.build()` returns it with every id the
tests need."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from deploy.anvil import AnvilProcess, dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import CourtConfig, create_pool
from ledger_client.chain.ledger import Ledger, connect
from ledger_client.ipfs.content import put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import WorkId, hex_text
from protocol.spotcheck import spot_check_indices, spot_check_randomness
from protocol.verdicts import TOPLOC_MISSING_STAT, Evidence, Reason, SpotCheck
from tests.support.conftest_chain import TOKENS, pool_config
from validator.court import register_with_court, vote_commitment

COURT = CourtConfig(validator_bond=200 * TOKENS, verdict_fee=TOKENS, dispute_bond=20 * TOKENS,
                    wrong_verdict_slash=60 * TOKENS, non_voter_penalty=10 * TOKENS, silence_penalty=5 * TOKENS,
                    assigned_window_s=60, verdict_window_s=120, dispute_window_s=60, commit_period_s=60,
                    reveal_period_s=60, activation_delay_s=5, committee_size=3, fee_funding=100 * TOKENS)
"""Windows of a minute: the chain's clock follows the wall clock between the `evm_increaseTime` jumps, so a loaded
machine (make test: four modules at once on two cores) must not push a step of the run out of its window."""
VALIDATORS = (3, 5, 6, 7, 8)
WORKER = 4
N = 8
TOPLOC_THRESHOLDS = {"min_exp_matches": 90, "per_points": 128, "max_mant_err_mean": 10.0, "max_mant_err_median": 8.0,
                     "mean_excludes_max": False}


@dataclasses.dataclass
class CourtRun:
    tmp: Path
    anvil: AnvilProcess
    kubo_api: str
    w3: object = None
    deployment: object = None
    accounts: list = dataclasses.field(default_factory=list)
    pool_id: int = 0
    config: object = None
    works: dict[str, bytes] = dataclasses.field(default_factory=dict)
    """case name → work id"""
    judges: dict[str, str] = dataclasses.field(default_factory=dict)
    """case name → the validator that gave (or was assigned and withheld) its first verdict"""
    evidence: dict[str, bytes] = dataclasses.field(default_factory=dict)
    disputer: str = ""
    committee: list[str] = dataclasses.field(default_factory=list)
    minority: str = ""
    standin: str = ""
    leaver: str = ""

    @property
    def worker(self) -> str:
        return self.accounts[WORKER].address

    @property
    def validators(self) -> list[str]:
        return [self.accounts[i].address for i in VALIDATORS]

    def ledger(self, who: int | str) -> Ledger:
        if isinstance(who, str):
            who = next(i for i, a in enumerate(self.accounts) if a.address == who)
        return Ledger(self.w3, self.deployment, self.accounts[who])

    def rpc(self, method: str, params: list):
        return self.w3.provider.make_request(method, params)

    def travel(self, seconds: int) -> None:
        self.rpc("evm_increaseTime", [seconds])
        self.rpc("evm_mine", [])

    def mine(self, n: int = 1) -> None:
        self.rpc("anvil_mine", [n])

    def submit(self, tag: int) -> bytes:
        """The worker's next submission (a made-up digest: nobody fetches it here), with two blocks mined on top
        so that its assignment is drawn."""
        ledger = self.ledger(WORKER)
        ledger.ensure_allocation(self.pool_id, ledger.required_allocation(self.pool_id, self.config.min_stake,
                                                                          self.config.slash_amount))
        nonce = ledger.pool.get_member(self.pool_id, ledger.address).next_nonce
        ledger.pool.submit_work(self.pool_id, 0, nonce, bytes([tag]) * 32, N)
        self.mine(2)  # a verdict (and the assignment view) needs a block after the one whose hash draws it
        return bytes(ledger.pool.work_id_of(self.pool_id, ledger.address, nonce))

    def assigned(self, work_id: bytes) -> str:
        return self.ledger(0).court.assigned_validator(work_id)

    def submission_block(self, work_id: bytes) -> int:
        logs = self.ledger(0).pool.contract.events.WorkSubmitted.get_logs(argument_filters={"workId": work_id},
                                                                           from_block=0)
        return logs[-1]["blockNumber"]

    def close(self) -> None:
        self.anvil.stop()

    # ------------------------------------------------------------------ the run

    @classmethod
    def build(cls, tmp: Path, kubo_api: str) -> CourtRun:
        run = cls(tmp, start_anvil(tmp / "anvil.log", accounts=10), kubo_api)
        try:
            run._build()
        except BaseException:
            run.close()
            raise
        return run

    def _build(self) -> None:
        self.w3 = connect(self.anvil.rpc_url, 31337)
        self.accounts = dev_accounts(10)
        self.deployment = deploy_contracts(self.w3, self.accounts[0], treasury=self.accounts[9].address)
        admin = Ledger(self.w3, self.deployment, self.accounts[0])
        for i in (1, WORKER, *VALIDATORS):
            admin.token.mint(self.accounts[i].address, 100_000 * TOKENS)
        self.config = pool_config(self.accounts, validators=[], court=COURT, challenge_window_s=400,
                                  reward_lock_s=401, spot_check_bps=5_000, max_samples_per_work=N)
        self.pool_id = create_pool(self.ledger(1), self.config)
        for i in VALIDATORS:
            register_with_court(self.ledger(i), self.pool_id)
        self.travel(COURT.activation_delay_s + 1)
        worker = self.ledger(WORKER)
        worker.ensure_allocation(self.pool_id, 10 * self.config.slash_amount)
        worker.pool.join_pool(self.pool_id)
        with KuboClient(self.kubo_api) as kubo:
            self._cases(kubo)
        self._exits()

    def _cases(self, kubo: KuboClient) -> None:
        w = self.works
        for name, tag in (("accepted", 0xA1), ("toploc", 0xB2), ("overturn", 0xC3), ("standin", 0xD4),
                          ("lapsed", 0xE5)):
            w[name] = self.submit(tag)
            self.judges[name] = self.assigned(w[name])
        self.ledger(self.judges["accepted"]).court.attest(w["accepted"])
        self.evidence["toploc"] = put_object(kubo, self._toploc_evidence(w["toploc"]).model_dump_json().encode())
        self.ledger(self.judges["toploc"]).court.challenge(w["toploc"], int(Reason.TOPLOC), self.evidence["toploc"])
        self.ledger(self.judges["overturn"]).court.attest(w["overturn"])  # attest-all's word on a fabricated file

        judge = self.judges["overturn"]
        self.disputer = next(v for v in self.validators if v != judge)
        dispute = Evidence(work_id=WorkId(w["overturn"]).text, pool_id=self.pool_id, worker=self.worker,
                           reason="REWARD", reason_code=int(Reason.REWARD),
                           message=f"3 of {N} rewards differ from the task verifier's", failing_samples=[1, 4, 6],
                           validator=self.disputer)
        self.evidence["overturn"] = put_object(kubo, dispute.model_dump_json().encode())
        self.ledger(self.disputer).court.dispute(w["overturn"], self.evidence["overturn"])
        self.mine(2)
        court = self.ledger(0).court
        court.draw_committee(w["overturn"])
        self.committee = list(court.committee_of(w["overturn"]))
        self.minority = self.committee[0]
        salt = bytes([0x5A]) * 32
        for member in self.committee:
            self.ledger(member).court.commit_vote(
                w["overturn"], vote_commitment(w["overturn"], member, member == self.minority, salt))
        # past the assigned window (and the commit period): a validator other than the silent assignee stands in
        self.standin = next(v for v in self.validators if v != self.judges["standin"])
        self.travel(COURT.assigned_window_s + 1)
        self.ledger(self.standin).court.attest(w["standin"])
        for member in self.committee:
            self.ledger(member).court.reveal_vote(w["overturn"], member == self.minority, salt)
        self.travel(COURT.reveal_period_s)
        court.resolve(w["overturn"])
        self.travel(COURT.dispute_window_s)
        for name in ("accepted", "toploc", "standin"):
            court.finalize(w[name])
        self.travel(COURT.verdict_window_s)
        court.finalize(w["lapsed"])  # nobody judged: void, the assignee's silence penalty to the fee budget
        self.travel(self.config.challenge_window_s)
        self.ledger(0).pool.expire_work(w["lapsed"])
        self.travel(self.config.reward_lock_s)
        self.ledger(WORKER).pool.claim([w["accepted"], w["standin"]])

    def _toploc_evidence(self, work_id: bytes) -> Evidence:
        block = self.submission_block(work_id)
        block_hash = bytes(self.w3.eth.get_block(block + 1)["hash"])
        randomness = spot_check_randomness(block_hash, work_id)
        indices = spot_check_indices(randomness, N, 5_000)
        failing = sorted(indices)  # every drawn completion fails; the last two in both of their chunks
        # the first failing one's chunk 1 matched no exponent: the proof's sentinel stands for its mantissa errors
        details = {"failing_chunks": [1], "exp_mismatches": [12, 128], "mant_err_mean": [2.5, TOPLOC_MISSING_STAT],
                   "mant_err_median": [2.0, TOPLOC_MISSING_STAT], "thresholds": TOPLOC_THRESHOLDS}
        return Evidence(work_id=WorkId(work_id).text, pool_id=self.pool_id, worker=self.worker, reason="TOPLOC",
                        reason_code=int(Reason.TOPLOC),
                        message=f"{len(failing)} of {N} completions fail toploc: 1 of 2 chunks outside thresholds",
                        failing_samples=failing,
                        failing_chunks={str(i): [0, 1] if k >= 2 else [1] for k, i in enumerate(failing)},
                        statistics={"first_failure": details}, thresholds=TOPLOC_THRESHOLDS,
                        spot_check=SpotCheck(spot_check_bps=5_000, n=N, m=len(indices), indices=indices,
                                             submission_block=block, block_hash=hex_text(block_hash),
                                             randomness=hex_text(randomness)),
                        validator=self.judges["toploc"])

    def _exits(self) -> None:
        """A validator that judged nothing open leaves: deregister, wait the exit delay, withdraw bond and fees;
        the worker unbonds free stake and withdraws it."""
        court = self.ledger(0).court
        self.leaver = self.judges["accepted"]
        leaver = self.ledger(self.leaver).court
        leaver.deregister(self.pool_id)
        self.travel(court.exit_delay(self.pool_id) + 1)
        leaver.withdraw_bond(self.pool_id)
        leaver.withdraw()
        worker = self.ledger(WORKER)
        worker.ensure_stake(5 * TOKENS)
        worker.stake.unbond(5 * TOKENS)
        self.travel(worker.stake.unbonding_delay() + 1)
        worker.stake.withdraw()
