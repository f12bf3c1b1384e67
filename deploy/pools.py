"""What `pool create | fund | status | close` do (deploy/pool_cli.py parses their command lines): pool owners run
pools through contract calls.

A pool is described by a TOML file (see examples/pool.toml). Addresses may be written as
`@trainer`, `@validator`, ... to name the local devnet's dev accounts, and `task` and `base_checkpoint` as
`@init`: what the last `trainer init` on the devnet published. `pool create` checks before it spends: the run
spec and base checkpoint readable on IPFS, a slash large enough for the pool's spot-check fraction
(ComputePool._checkIncentives), the court's bounds, the owner's balance; it prints the detection probability of
a file with one fabricated completion and the break-even slash. A failure after the first transaction names the
pool it left and the command that finishes or undoes it.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated

from eth_utils import is_address, keccak, to_checksum_address
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from web3.logs import DISCARD

from cli.errors import UsageError, describe_error
from cli.options import parse_amount
from cli.output import tokens
from deploy.terms import IPFS_CHECK_TIMEOUT_S, PoolHalfCreated, read_pool_toml
from ledger_client.chain.batches import batches_of
from ledger_client.chain.bindings import BatchParams, CourtParams, Params, PoolParams
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import court_of, court_validators, pool_state
from ledger_client.ipfs.content import ContentError, fetch_run_spec
from ledger_client.ipfs.kubo import KuboClient, KuboNotFound, KuboTimeout
from protocol.digest import Digest, InvalidCid, cid_to_digest, hex_text
from protocol.manifest import CheckpointError
from protocol.pool import VALIDATOR_FETCH_TIMEOUT_S, VALIDATOR_VERDICT_MARGIN_S
from protocol.runspec import RunSpec
from protocol.spotcheck import MAX_BPS, detection_probability, min_slash, spot_check_count

Amount = Annotated[int, BeforeValidator(parse_amount), Field(ge=0)]
# ComputePool's bounds (MAX_BOUNTY_BPS, MAX_CHALLENGE_WINDOW, MAX_REWARD_LOCK), checked before any transaction.
MAX_BOUNTY_BPS = 5_000
MAX_CHALLENGE_WINDOW_S = 30 * 24 * 3600
MAX_REWARD_LOCK_S = 60 * 24 * 3600
# ValidatorCourt's bounds (MAX_PERIOD, MIN_COMMITTEE, MAX_COMMITTEE, SPOT_CHECK_MARGIN_BPS).
MAX_COURT_PERIOD_S = 30 * 24 * 3600
MIN_COMMITTEE = 3
MAX_COMMITTEE = 15
COURT_SPOT_CHECK_MARGIN_BPS = 2_000
# ForcedErrors' bounds (MAX_FORCED_BPS, MAX_PERIOD): docs/protocol.md R1.17–R1.22.
MAX_FORCED_BPS = 1_000
MAX_FORCED_ERRORS_PERIOD_S = 7 * 24 * 3600
# WorkBatches' bounds (MIN_EPOCH, MAX_EPOCH, MAX_LEAVES): docs/protocol.md R1.23–R1.25.
MIN_BATCH_EPOCH_S = 60
MAX_BATCH_EPOCH_S = 7 * 24 * 3600
MAX_BATCH_LEAVES = 4_096
FROM_TRAINER_INIT = "@init"
"""`task` / `base_checkpoint` value: the digest the last `trainer init` on the devnet recorded."""


def samples_per_submission(spec: RunSpec) -> int:
    """Samples in one submission of the run spec: prompts_per_submission × group_size."""
    return spec.prompts_per_submission * spec.sampling.group_size


def vote_pay(non_voter_penalty: int) -> int:
    """What a dispute's majority voter is paid, whichever side wins: half a seat's penalty (docs/protocol.md R9.13)."""
    return non_voter_penalty // 2


class ForcedErrorsConfig(BaseModel):
    """The `[pool.court.forced_errors]` table: committed hash chains draw audits nobody can predict, and forced
    errors make checking pay when nobody cheats (the ForcedErrors contract; docs/protocol.md R9.25–R9.29). A court
    pool without it has no forced errors and no chains: its validators draw audits from their own key's HMAC.
    Bounds: docs/protocol.md §1.3 (R1.17–R1.22), checked by `pool create` before any transaction."""

    model_config = ConfigDict(extra="forbid")

    forced_bps: int = Field(description="ρ in basis points: the chance that a file owes a forced error (R1.17: at most "
                            "1000)")
    audit_bps: int = Field(description="each validator's chance, in basis points, of being drawn to audit a file "
                           "(R1.18)")
    epoch_length_s: int = Field(description="seconds an epoch lasts: one link of every chain is revealed per epoch "
                                "(R1.19)")
    reveal_window_s: int = Field(description="seconds to reveal an epoch's link, from the epoch's end plus the "
                                 "challenge window (R1.19)")
    jackpot: Amount = Field(description="paid from the verification budget to the validator that judged a forced "
                            "error invalid (R1.22: ρ × jackpot ≤ the largest file's reward)")
    validator_bond: Amount = Field(description="stake a validator locks with its chain, besides the court's bond "
                                   "(R1.20: ≥ wrong_verdict_slash)")
    worker_bond: Amount = Field(description="stake a worker locks with its chain, besides its allocation (R1.20: ≥ "
                                "slash_amount + the largest file's reward)")
    silence_penalty: Amount = Field(description="a validator that does not reveal an epoch's link in time loses this "
                                    "(R1.21: 4 × it ≤ wrong_verdict_slash)")
    budget_funding: Amount = Field(0, description="verification budget (jackpots; a caught forced error's refunded slash and reward) the owner adds at creation")

    def params(self) -> Params:
        return Params(forced_bps=self.forced_bps, audit_bps=self.audit_bps, epoch_length=self.epoch_length_s,
                      reveal_window=self.reveal_window_s, jackpot=self.jackpot, validator_bond=self.validator_bond,
                      worker_bond=self.worker_bond, silence_penalty=self.silence_penalty)


class BatchesConfig(BaseModel):
    """The `[pool.batches]` table of a permissioned pool: its files are signed off-chain and settled in batches (the
    WorkBatches contract; docs/protocol.md §3.1, R3.7–R3.13) instead of one `submitWork` each. Bounds: §1.4
    (R1.23–R1.25), checked by `pool create` before any transaction."""

    model_config = ConfigDict(extra="forbid")

    epoch_length_s: int = Field(description="seconds an epoch lasts: its leaves are seeded by its beacon and posted by "
                                "the next epoch's end (R1.23: 60 s .. 7 days)")
    max_leaves: int = Field(description="files a worker is paid for per epoch (R1.24: 1..4096)")
    worker_bond: Amount = Field(description="stake a worker locks in WorkBatches; a bad leaf costs slash_amount of it "
                                "(R1.25: ≥ slash_amount × max_leaves × (2 + ⌈challenge_window_s / epoch_length_s⌉))")
    budget_funding: Amount = Field(0, description="claim budget the owner adds at creation (batched claims are paid "
                                   "from it, not from the pool's funding)")

    def params(self) -> BatchParams:
        return BatchParams(epoch_length=self.epoch_length_s, max_leaves=self.max_leaves, worker_bond=self.worker_bond)

    def least_bond(self, slash_amount: int, challenge_window_s: int) -> int:
        """R1.25's least worker bond."""
        return slash_amount * self.max_leaves * (2 + -(-challenge_window_s // self.epoch_length_s))


class CourtConfig(BaseModel):
    """The `[pool.court]` table: the pool is judged by the ValidatorCourt's bonded validators (anyone may
    register) instead of a list the owner writes. Bounds: docs/protocol.md §1.2; the court: §9."""

    model_config = ConfigDict(extra="forbid")

    validator_bond: Amount = Field(description="stake a validator locks to register; its verdicts answer with it")
    verdict_fee: Amount = Field(description="paid from the fee budget to the validator whose verdict becomes final")
    dispute_bond: Amount = Field(gt=0, description="a disputer's bond, lost when the committee upholds the verdict")
    wrong_verdict_slash: Amount = Field(gt=0, description="what a judge loses when a dispute overturns its verdict")
    non_voter_penalty: Amount = Field(gt=0, description="a committee member that does not reveal, or votes with the "
                                      "losing side, loses this")
    silence_penalty: Amount = Field(description="an assigned validator that lets its window pass loses this")
    assigned_window_s: int = Field(gt=0, description="seconds the drawn validator alone may judge a submission")
    verdict_window_s: int = Field(gt=0, le=MAX_COURT_PERIOD_S, description="seconds after a submission in which any "
                                  "registered validator may stand in once the assigned window has passed")
    dispute_window_s: int = Field(gt=0, le=MAX_COURT_PERIOD_S, description="seconds after a verdict in which it can "
                                  "be disputed; the verdict is final after it")
    commit_period_s: int = Field(gt=0, le=MAX_COURT_PERIOD_S, description="committee's commit phase of a dispute")
    reveal_period_s: int = Field(gt=0, le=MAX_COURT_PERIOD_S, description="committee's reveal phase of a dispute")
    activation_delay_s: int = Field(60, gt=0, le=MAX_COURT_PERIOD_S, description="seconds before a (de)registration "
                                    "counts: a case is judged by the validators active this long before it")
    committee_size: int = Field(3, ge=MIN_COMMITTEE, le=MAX_COMMITTEE, description="validators drawn to judge a "
                                "dispute; odd")
    fee_funding: Amount = Field(0, description="verdict-fee budget the owner adds at creation")
    forced_errors: ForcedErrorsConfig | None = Field(None, description="committed hash chains and forced errors (see "
                                                     "its table); none without it")

    @model_validator(mode="after")
    def _consistent(self) -> "CourtConfig":
        if self.committee_size % 2 == 0:
            raise ValueError("committee_size must be odd (a majority always exists without ties)")
        if self.assigned_window_s >= self.verdict_window_s:
            raise ValueError("assigned_window_s must be < verdict_window_s (others must be able to stand in)")
        if not 4 * self.silence_penalty <= self.wrong_verdict_slash <= self.validator_bond:
            raise ValueError("need 4 × silence_penalty <= wrong_verdict_slash <= validator_bond (a missed window "
                             "costs at most a quarter of a wrong verdict)")
        if max(self.dispute_bond, self.non_voter_penalty) > self.validator_bond:
            raise ValueError("validator_bond must cover dispute_bond and non_voter_penalty")
        voters_pay = self.committee_size * vote_pay(self.non_voter_penalty)
        if voters_pay > min(self.dispute_bond, self.wrong_verdict_slash):
            raise ValueError(f"a whole committee's vote pay, committee_size × non_voter_penalty / 2 = {voters_pay}, must "
                             "be at most dispute_bond and wrong_verdict_slash (the losing side's stake pays it)")
        return self

    def decided_within_s(self) -> int:
        """Seconds after a submission by which its verdict is final, however it is disputed."""
        return self.verdict_window_s + self.dispute_window_s + self.commit_period_s + self.reveal_period_s

    def settle_margin_s(self, min_period_s: int = 1) -> int:
        """The least gap the court asks between `decided_within_s` and the pool's challenge window."""
        return max(min_period_s, self.decided_within_s() // 4)

    def params(self) -> CourtParams:
        return CourtParams(validator_bond=self.validator_bond, verdict_fee=self.verdict_fee,
                           dispute_bond=self.dispute_bond, non_voter_penalty=self.non_voter_penalty,
                           silence_penalty=self.silence_penalty, assigned_window=self.assigned_window_s,
                           verdict_window=self.verdict_window_s, dispute_window=self.dispute_window_s,
                           commit_period=self.commit_period_s, reveal_period=self.reveal_period_s,
                           committee_size=self.committee_size, wrong_verdict_slash=self.wrong_verdict_slash,
                           activation_delay=self.activation_delay_s)


class PoolConfig(BaseModel):
    """The `[pool]` table of a pool TOML file."""

    model_config = ConfigDict(extra="forbid")

    trainer: str = Field(description="address of the pool's trainer (the only account that publishes checkpoints)")
    validators: list[str] = Field(default_factory=list, description="the owner's validator list (permissioned "
                                  "pools); empty with a [pool.court] table")
    court: CourtConfig | None = Field(None, description="judge the pool with the ValidatorCourt (see its table)")
    batches: BatchesConfig | None = Field(None, description="settle the pool's files in batches (WorkBatches; see "
                                          "its table); permissioned pools only")
    min_stake: Amount = Field(description="stake a worker must have allocated to submit")
    reward_per_sample: Amount = Field(description="paid per sample of an accepted submission, after the reward lock")
    slash_amount: Amount = Field(description="what a worker loses per rejected submission")
    bounty_bps: int = Field(ge=0, le=MAX_BOUNTY_BPS, description="challenger's share of a slash; at most 50 %")
    challenge_window_s: int = Field(gt=0, le=MAX_CHALLENGE_WINDOW_S, description="seconds after a submission in "
                                    "which it can be challenged (a court pool: its verdict must be final by then)")
    reward_lock_s: int = Field(gt=0, le=MAX_REWARD_LOCK_S, description="seconds before an accepted submission's "
                               "reward can be claimed; > challenge_window_s")
    async_level: int = Field(ge=0, lt=2**32, description="k: work on a policy older than step − k is stale")
    task: str = Field(min_length=1, description="0x digest of the pool's run spec on IPFS, as `trainer init` prints "
                      "it; \"@init\" on the devnet: what its last `trainer init` published")
    base_checkpoint: str = Field(description="0x digest (or manifest CID) of the step-0 policy, as `trainer init` "
                                 "prints it; \"@init\" on the devnet")
    max_samples_per_work: int | None = Field(None, gt=0, lt=2**32, description="samples one submission may claim; "
                                             "default: the task run spec's prompts_per_submission × group_size")
    spot_check_bps: int | None = Field(None, gt=0, le=MAX_BPS, description="q in basis points: the fraction of "
                                       "each file's completions given the expensive checks; default: the task run "
                                       "spec's verification.spot_check_bps, else 10000 (check all)")
    funding: Amount = Field(0, description="budget the owner adds at creation (rewards are paid from it)")

    @model_validator(mode="after")
    def _lock_after_window(self) -> "PoolConfig":
        if self.reward_lock_s <= self.challenge_window_s:
            raise ValueError("reward_lock_s must be > challenge_window_s (no claim in the second a challenge can land)")
        if bool(self.validators) == (self.court is not None):
            raise ValueError("give either validators (a permissioned pool) or a [pool.court] table, not both")
        if self.court is not None and self.batches is not None:
            raise ValueError("a [pool.batches] table is for a permissioned pool: WorkBatches refuses court pools "
                             "(CourtPoolNotSupported)")
        if self.court is not None and self.court.activation_delay_s > self.challenge_window_s:
            raise ValueError(f"the court's activation_delay_s ({self.court.activation_delay_s}) must be at most "
                             f"challenge_window_s ({self.challenge_window_s}): it is also the validators' exit delay")
        if self.court is not None and self.court.decided_within_s() + self.court.settle_margin_s() > self.challenge_window_s:
            raise ValueError(f"the court's verdict, dispute, commit and reveal periods ({self.court.decided_within_s()} s) "
                             f"plus a margin of {self.court.settle_margin_s()} s must fit in challenge_window_s "
                             f"({self.challenge_window_s})")
        return self

    def samples_per_work(self, spec: RunSpec | None = None) -> int:
        """`maxSamplesPerWork`: as configured, else one submission of the run spec `spec`."""
        if self.max_samples_per_work is not None:
            return self.max_samples_per_work
        if spec is None:
            raise UsageError("max_samples_per_work is required when the pool's task is not a run spec on IPFS")
        return samples_per_submission(spec)

    def spot_check(self, spec: RunSpec | None = None) -> int:
        """`spotCheckBps`: as configured, else the run spec's, else 10000 (every completion checked)."""
        if self.spot_check_bps is not None:
            return self.spot_check_bps
        return spec.verification.spot_check_bps if spec is not None else MAX_BPS

    def task_ref(self) -> bytes:
        if self.task.startswith("0x") and len(self.task) == 66:
            return bytes.fromhex(self.task[2:])
        return keccak(text=self.task)

    def base_checkpoint_digest(self) -> bytes:
        v = self.base_checkpoint
        if v.startswith("0x"):
            if len(v) != 66:
                raise UsageError("base_checkpoint: a 0x digest must be 32 bytes (64 hex digits)")
            return bytes.fromhex(v[2:])
        try:
            return cid_to_digest(v)
        except InvalidCid as exc:
            raise UsageError(f"base_checkpoint: {exc}") from None


def load_pool_config(path: Path, devnet: dict | None, trainer_init: dict[str, str] | None = None) -> PoolConfig:
    """Parse and validate a pool TOML; `@role` addresses resolve against the devnet, `@init` digests against
    what `trainer init` recorded there (`trainer_init`)."""
    return pool_config(path, read_pool_toml(path), devnet, trainer_init)


def pool_config(path: Path, doc: dict, devnet: dict | None, trainer_init: dict[str, str] | None = None) -> PoolConfig:
    """`load_pool_config` of the tables `doc` read from `path` (`read_pool_toml`)."""
    cfg = PoolConfig.model_validate(doc["pool"])
    cfg.trainer = _address(cfg.trainer, devnet, "trainer")
    cfg.validators = [_address(v, devnet, "validators") for v in cfg.validators]
    for name in ("task", "base_checkpoint"):
        if getattr(cfg, name) == FROM_TRAINER_INIT:
            if trainer_init is None:
                raise UsageError(f'{name} = "{FROM_TRAINER_INIT}" takes what `trainer init` published on the devnet, '
                                 "and it has not run there: run `trainer init --run-spec run.toml` first")
            setattr(cfg, name, trainer_init[name])
    return cfg


def _address(value: str, devnet: dict | None, field: str) -> str:
    if value.startswith("@"):
        role = value[1:]
        if devnet is None or role not in devnet["roles"]:
            raise UsageError(f"{field}: {value} names a devnet role, but no devnet is up or it has no such role")
        return devnet["roles"][role]["address"]
    if not is_address(value):
        raise UsageError(f"{field}: {value!r} is not an Ethereum address")
    return to_checksum_address(value)


def spot_check_terms(cfg: PoolConfig, spec: RunSpec | None = None) -> dict:
    """What the spot-check rule means for this pool: a file of maxSamplesPerWork completions of which
    m = ceil(q·n) get the expensive checks; the probability that one fabricated completion is among
    them; the file's reward and the least slash `createPool` accepts (docs/protocol.md); with a floor of checked
    tokens or a required power, the margin test's power at the floor (`floor_power_terms`)."""
    n, bps = cfg.samples_per_work(spec), cfg.spot_check(spec)
    m = spot_check_count(n, bps)
    return {"spot_check_bps": bps, "checked_per_file": f"{m} of {n}",
            "detection_probability_1_fabricated": round(detection_probability(n, m, 1), 6),
            "file_reward": cfg.reward_per_sample * n,
            "break_even_slash": min_slash(bps, cfg.reward_per_sample, n)} | floor_power_terms(spec)


def floor_power_terms(spec: RunSpec | None) -> dict:
    """The run spec's floor of checked tokens and the margin test's per-file power there against a 1.9ε logit bias
    (docs/protocol.md R8.6), with the required power where the spec states one; nothing when it states neither."""
    if spec is None or not (spec.verification.min_checked_tokens or spec.verification.min_power):
        return {}
    floor, required = spec.verification.min_checked_tokens, spec.verification.min_power
    return {"min_checked_tokens": floor, "bias_power_at_floor": round(spec.bias_power(floor), 4)} \
        | ({"min_power": required} if required else {})


def check_checked_token_floor(cfg: PoolConfig, spec: RunSpec | None) -> None:
    """UsageError when the run spec's floor of checked tokens is more than a file of the pool can hold
    (maxSamplesPerWork completions of max_tokens each): every file would be checked whole and still fall short of
    the power the floor was set for; or when the floor gives the margin test less than the spec's `min_power`
    against a 1.9ε logit bias, naming the floor that would (docs/protocol.md R8.6)."""
    if spec is None:
        return
    floor, required = spec.verification.min_checked_tokens, spec.verification.min_power
    n = cfg.samples_per_work(spec)
    most = n * spec.sampling.max_tokens
    if floor > most:
        raise UsageError(f"the run spec's verification.min_checked_tokens {floor} is more than a file can hold: "
                         f"max_samples_per_work {n} × sampling.max_tokens {spec.sampling.max_tokens} = {most}")
    if required and (power := spec.bias_power(floor)) < required:
        needed = spec.tokens_for_power(required, most)
        fix = f"a floor of {needed} checked tokens reaches it" if needed is not None else \
            f"no floor a file can hold reaches it (max_samples_per_work {n} × sampling.max_tokens " \
            f"{spec.sampling.max_tokens} = {most} tokens)"
        raise UsageError(f"the run spec's verification.min_checked_tokens {floor} gives the margin test a per-file "
                         f"power of {power:.4f} against a 1.9ε logit bias, below verification.min_power {required}: "
                         f"{fix}")


def check_spot_check_bound(cfg: PoolConfig, spec: RunSpec | None = None) -> dict:
    """`spot_check_terms`, or UsageError when the slash is below the break-even slash (the contract's
    SlashBelowSpotCheckBound, caught before any transaction)."""
    terms = spot_check_terms(cfg, spec)
    if cfg.slash_amount < terms["break_even_slash"]:
        raise UsageError(
            f"slash_amount {cfg.slash_amount} is below {terms['break_even_slash']}, the least at which a worker "
            f"fabricating one completion per file gains nothing: spot_check_bps {terms['spot_check_bps']} checks "
            f"{terms['checked_per_file']} completions (detection probability "
            f"{terms['detection_probability_1_fabricated']:.4f}), file reward {terms['file_reward']}")
    return terms


def check_court_bounds(cfg: PoolConfig, spec: RunSpec | None, min_period_s: int) -> None:
    """The ValidatorCourt's `BadCourtParams` rules that depend on the deployment (its `minPeriod`) or on the
    pool's economics, as a UsageError before any transaction."""
    court = cfg.court
    assert court is not None
    periods = {"assigned_window_s": court.assigned_window_s, "dispute_window_s": court.dispute_window_s,
               "commit_period_s": court.commit_period_s, "reveal_period_s": court.reveal_period_s,
               "activation_delay_s": court.activation_delay_s,
               "verdict_window_s - assigned_window_s": court.verdict_window_s - court.assigned_window_s}
    if court.commit_period_s < 2 * min_period_s:  # the committee is drawn in its first half
        raise UsageError(f"court commit_period_s is {court.commit_period_s} s, below twice this court's minimum period "
                         f"of {min_period_s} s (the committee is drawn in its first half)")
    for name, value in periods.items():
        if value < min_period_s:
            raise UsageError(f"court {name} is {value} s, below this court's minimum period of {min_period_s} s "
                             "(a few of the chain's blocks)")
    margin = court.settle_margin_s(min_period_s)
    if court.decided_within_s() + margin > cfg.challenge_window_s:
        raise UsageError(f"challenge_window_s {cfg.challenge_window_s} must be at least the court's periods "
                         f"({court.decided_within_s()} s) plus a margin of {margin} s")
    bounty = cfg.slash_amount * cfg.bounty_bps // MAX_BPS
    if court.wrong_verdict_slash < bounty + court.verdict_fee:
        raise UsageError(f"court wrong_verdict_slash {court.wrong_verdict_slash} is below what a wrong challenge "
                         f"earns its judge: bounty {bounty} + verdict_fee {court.verdict_fee}")
    q = cfg.spot_check(spec)
    loss = max(0, cfg.slash_amount - bounty - court.verdict_fee)
    gain = (MAX_BPS - q) * cfg.reward_per_sample * cfg.samples_per_work(spec)
    if q * loss * MAX_BPS < gain * (MAX_BPS + COURT_SPOT_CHECK_MARGIN_BPS):
        raise UsageError(f"slash_amount {cfg.slash_amount} is too low for a court pool: a worker whose own validator "
                         f"challenges its file loses only {loss} (slash - bounty - verdict_fee), and spot_check_bps "
                         f"{q} needs q*loss >= 1.2*(1-q)*file reward")


def check_forced_error_bounds(cfg: PoolConfig, spec: RunSpec | None, min_period_s: int) -> None:
    """ForcedErrors' `BadForcedErrorParams` rules (docs/protocol.md R1.17–R1.22) as a UsageError naming the rule,
    before any transaction; nothing for a pool without forced errors."""
    fe = cfg.court.forced_errors if cfg.court is not None else None
    if fe is None:
        return
    court = cfg.court
    largest = cfg.reward_per_sample * cfg.samples_per_work(spec)

    def refuse(rule: str, why: str) -> None:
        raise UsageError(f"forced_errors: {why} (docs/protocol.md {rule}); nothing was created")

    if not 1 <= fe.forced_bps <= MAX_FORCED_BPS:
        refuse("R1.17", f"forced_bps {fe.forced_bps} must be in 1..{MAX_FORCED_BPS} (a forced error is a file nobody "
                        "trains on: at most 10 %)")
    if not 1 <= fe.audit_bps <= MAX_BPS:
        refuse("R1.18", f"audit_bps {fe.audit_bps} must be in 1..{MAX_BPS}")
    for name in ("epoch_length_s", "reveal_window_s"):
        if not min_period_s <= getattr(fe, name) <= MAX_FORCED_ERRORS_PERIOD_S:
            refuse("R1.19", f"{name} {getattr(fe, name)} must be in {min_period_s}..{MAX_FORCED_ERRORS_PERIOD_S} s "
                            "(this court's minimum period .. 7 days)")
    if fe.validator_bond < court.wrong_verdict_slash:
        refuse("R1.20", f"validator_bond {fe.validator_bond} must be at least the court's wrong_verdict_slash "
                        f"{court.wrong_verdict_slash}")
    if fe.worker_bond < cfg.slash_amount + largest:
        refuse("R1.20", f"worker_bond {fe.worker_bond} must be at least slash_amount + the largest file's reward "
                        f"({cfg.slash_amount} + {largest})")
    if not 0 < 4 * fe.silence_penalty <= court.wrong_verdict_slash:
        refuse("R1.21", f"silence_penalty {fe.silence_penalty} must be positive and at most a quarter of the court's "
                        f"wrong_verdict_slash {court.wrong_verdict_slash}")
    if fe.jackpot == 0 or fe.forced_bps * fe.jackpot > MAX_BPS * largest:
        refuse("R1.22", f"jackpot {fe.jackpot} must be positive with forced_bps × jackpot / 10000 at most the largest "
                        f"file's reward {largest} (verification pays at most what the work does)")


def check_batch_bounds(cfg: PoolConfig) -> None:
    """`WorkBatches.check`'s rules (docs/protocol.md R1.23–R1.25) on the `[pool.batches]` table: a UsageError naming
    the first broken one before any transaction; nothing for a pool without batches."""
    b = cfg.batches
    if b is None:
        return

    def refuse(rule: str, why: str) -> None:
        raise UsageError(f"batches: {why} (docs/protocol.md {rule}); nothing was created")
    if not MIN_BATCH_EPOCH_S <= b.epoch_length_s <= MAX_BATCH_EPOCH_S:
        refuse("R1.23", f"epoch_length_s {b.epoch_length_s} must be in {MIN_BATCH_EPOCH_S}..{MAX_BATCH_EPOCH_S}")
    if not 1 <= b.max_leaves <= MAX_BATCH_LEAVES:
        refuse("R1.24", f"max_leaves {b.max_leaves} must be in 1..{MAX_BATCH_LEAVES}")
    least = b.least_bond(cfg.slash_amount, cfg.challenge_window_s)
    if b.worker_bond < least:
        refuse("R1.25", f"worker_bond {b.worker_bond} must be at least slash_amount × max_leaves × (2 + "
                        f"⌈challenge_window_s / epoch_length_s⌉) = {least}")


def check_validator_windows(court: CourtConfig) -> None:
    """The court windows in which a validator fetches a file and answers (verdict window: judge; dispute window:
    audit; commit period: vote) are long enough for a validator with `validator start`'s defaults (one fetch
    timeout plus the verdict margin, docs/protocol.md R9.21): a UsageError naming the first that is not."""
    least = VALIDATOR_FETCH_TIMEOUT_S + VALIDATOR_VERDICT_MARGIN_S
    for name in ("verdict_window_s", "dispute_window_s", "commit_period_s"):
        if getattr(court, name) < least:
            raise UsageError(f"court {name} is {getattr(court, name)} s, below {least:g} s: a validator with `validator "
                             f"start`'s defaults (--fetch-timeout {VALIDATOR_FETCH_TIMEOUT_S:g} s + --verdict-margin "
                             f"{VALIDATOR_VERDICT_MARGIN_S:g} s) could not fetch a file and answer in it; nothing was "
                             "created")


def create_pool(ledger: Ledger, cfg: PoolConfig, spec: RunSpec | None = None) -> int:
    """Create (and fund, if cfg.funding > 0) a pool; returns its id. `spec` is the task's run spec, whose
    submission size and spot-check fraction are the defaults of `maxSamplesPerWork` and `spotCheckBps`."""
    check_spot_check_bound(cfg, spec)
    check_checked_token_floor(cfg, spec)
    if spec is not None and cfg.max_samples_per_work is not None \
            and cfg.max_samples_per_work < (one_submission := samples_per_submission(spec)):
        raise UsageError(f"max_samples_per_work ({cfg.max_samples_per_work}) is below one submission of the run spec "
                         f"({one_submission} = prompts_per_submission × group_size): every submission would revert")
    fee_funding = cfg.court.fee_funding if cfg.court is not None else 0
    forced = cfg.court.forced_errors if cfg.court is not None else None
    budget_funding = forced.budget_funding if forced is not None else 0
    claim_funding = cfg.batches.budget_funding if cfg.batches is not None else 0
    check_batch_bounds(cfg)
    if cfg.batches is not None and ledger.batches is None:
        raise UsageError("the pool has a [pool.batches] table but this deployment has no WorkBatches contract "
                         "(deployed by `devnet deploy` since issue 43's batched settlement); nothing was created")
    if needed := cfg.funding + fee_funding + budget_funding + claim_funding:  # refused before the first transaction
        balance = ledger.token.balance_of(ledger.address)
        if balance < needed:
            raise UsageError(f"{ledger.address} holds {tokens(balance)}, the pool needs {tokens(needed)} (funding "
                             f"{tokens(cfg.funding)} + court fee funding {tokens(fee_funding)} + verification budget "
                             f"{tokens(budget_funding)} + batch claim budget {tokens(claim_funding)}); nothing was "
                             "created")
    court = ledger.court if cfg.court is not None else None
    if cfg.court is not None and court is None:
        raise UsageError("the pool has a [pool.court] table but this deployment has no ValidatorCourt")
    if forced is not None and ledger.forced_errors is None:
        raise UsageError("the pool has a [pool.court.forced_errors] table but this deployment has no ForcedErrors "
                         "contract (deployed by `devnet deploy` since issue 43's phase 3); nothing was created")
    if court is not None:
        check_court_bounds(cfg, spec, court.min_period())
        check_forced_error_bounds(cfg, spec, court.min_period())
    validators = [court.address] if court is not None else cfg.validators
    params = PoolParams(trainer=cfg.trainer, validators=validators, min_stake=cfg.min_stake,
                        reward_per_sample=cfg.reward_per_sample, slash_amount=cfg.slash_amount,
                        bounty_bps=cfg.bounty_bps, challenge_window=cfg.challenge_window_s,
                        reward_lock=cfg.reward_lock_s, max_staleness=cfg.async_level, task_ref=cfg.task_ref(),
                        base_checkpoint=cfg.base_checkpoint_digest(), max_samples_per_work=cfg.samples_per_work(spec),
                        spot_check_bps=cfg.spot_check(spec))
    receipt = ledger.pool.create_pool(params)
    (event,) = ledger.pool.contract.events.PoolCreated().process_receipt(receipt, errors=DISCARD)
    pool_id = event["args"]["poolId"]
    step = "configuring its court"
    try:
        if court is not None:
            ledger.pool.freeze_validators(pool_id, court.address)
            court.configure_pool(pool_id, cfg.court.params())
            if cfg.court.fee_funding:
                step = f"adding the court's fee budget of {cfg.court.fee_funding}"
                _approve(ledger, court.address, cfg.court.fee_funding)
                court.fund_fees(pool_id, cfg.court.fee_funding)
            if forced is not None:
                step = "configuring its forced errors"
                ledger.forced_errors.configure(pool_id, forced.params())
                if forced.budget_funding:
                    step = f"adding the verification budget of {forced.budget_funding}"
                    _approve(ledger, ledger.forced_errors.address, forced.budget_funding)
                    ledger.forced_errors.fund_budget(pool_id, forced.budget_funding)
        if cfg.batches is not None:
            step = "configuring its batches"
            ledger.batches.configure(pool_id, cfg.batches.params())
            if cfg.batches.budget_funding:
                step = f"adding the batch claim budget of {cfg.batches.budget_funding}"
                _approve(ledger, ledger.batches.address, cfg.batches.budget_funding)
                ledger.batches.fund(pool_id, cfg.batches.budget_funding)
        step = f"funding it with {cfg.funding}"
        if cfg.funding:
            fund_pool(ledger, pool_id, cfg.funding)
    except Exception as exc:
        finish = f"`pool fund {pool_id} {cfg.funding}` funds it" if step.startswith("funding") \
            else f"no command finishes that; `pool close {pool_id}` closes it"
        raise PoolHalfCreated(f"pool {pool_id} was created, but {step} failed ({describe_error(exc)}): "
                              f"{finish}") from exc
    return pool_id


def _approve(ledger: Ledger, spender: str, amount: int) -> None:
    balance = ledger.token.balance_of(ledger.address)
    if balance < amount:
        raise UsageError(f"{ledger.address} holds {tokens(balance)}, cannot fund {tokens(amount)}")
    if ledger.token.allowance(ledger.address, spender) < amount:
        ledger.token.approve(spender, amount)


def fund_pool(ledger: Ledger, pool_id: int, amount: int) -> None:
    """Approve (if needed) and fund a pool with `amount` base units."""
    _approve(ledger, ledger.pool.address, amount)
    ledger.pool.fund_pool(pool_id, amount)


def pool_status(ledger: Ledger, pool_id: int) -> dict:
    """The pool's parameters and state, for people and scripts; a court pool's court too (`court_terms`)."""
    state = pool_state(ledger, pool_id)
    status = {f.name: getattr(state, f.name) for f in fields(state)}
    status["status"] = state.status.name.lower()
    status["latest_checkpoint"] = Digest(ledger.pool.checkpoint_at(pool_id, state.latest_step))
    return {key: str(value) if isinstance(value, Digest) else value for key, value in status.items()} | \
        court_terms(ledger, pool_id) | batch_terms(ledger, pool_id)


def batch_terms(ledger: Ledger, pool_id: int) -> dict:
    """How the pool's files settle: `batches: "none"` (one `submitWork` each), or WorkBatches' rules for it (epoch in
    seconds, leaves a worker an epoch, worker bond), its claim budget and when its epoch 0 began."""
    wb = batches_of(ledger, pool_id)
    if wb is None:
        return {"batches": "none"}
    p = wb.get_params(pool_id)
    return {"batches": f"WorkBatches {wb.address}", "batches_epoch_length_s": p.epoch_length,
            "batches_max_leaves": p.max_leaves, "batches_worker_bond": p.worker_bond,
            "batches_budget": wb.budget(pool_id), "batches_genesis": wb.genesis_of(pool_id)}


COURT_WINDOWS = ("assigned_window", "verdict_window", "dispute_window", "commit_period", "reveal_period",
                 "activation_delay")


def court_terms(ledger: Ledger, pool_id: int) -> dict:
    """Who judges the pool: {} for its own validators; for the ValidatorCourt, its address, its rules for the pool
    (amounts, and windows in seconds), the fee budget left and the validators registered now."""
    court = court_of(ledger, pool_id)
    if court is None:
        return {}
    params = court.get_params(pool_id)._asdict()
    rules = {f"court_{name}{'_s' if name in COURT_WINDOWS else ''}": value for name, value in params.items()}
    return {"judged_by": f"ValidatorCourt {court.address}", **rules, "court_fee_budget": court.fee_budget(pool_id),
            "court_active_validators": court.active_count(pool_id),
            "court_validators": court_validators(ledger, court, pool_id)} | forced_error_terms(ledger, pool_id)


FORCED_ERROR_PERIODS = ("epoch_length", "reveal_window")


def forced_error_terms(ledger: Ledger, pool_id: int) -> dict:
    """A court pool's forced-error rules (`forced_errors_…`, periods in seconds), its verification budget and when
    its epoch 0 began; `forced_errors: "none"` for a pool whose owner did not configure them (no chains, no forced
    errors: its validators draw audits from their own key)."""
    fe = ledger.forced_errors
    params = fe.get_params(pool_id) if fe is not None else None
    if params is None or params.forced_bps == 0:
        return {"forced_errors": "none"}
    rules = {f"forced_errors_{name}{'_s' if name in FORCED_ERROR_PERIODS else ''}": value
             for name, value in params._asdict().items()}
    return {"forced_errors": f"ForcedErrors {fe.address}", **rules, "forced_errors_budget": fe.budget(pool_id),
            "forced_errors_genesis": fe.genesis(pool_id)}


def check_pool_content(cfg: PoolConfig, kubo_api: str | None, timeout: float = IPFS_CHECK_TIMEOUT_S) -> RunSpec:
    """The pool's run spec, read from IPFS, after checking that it and the base checkpoint's manifest are there
    and well-formed (within `timeout` each): a UsageError naming the digest otherwise, before any transaction."""
    if not (cfg.task.startswith("0x") and len(cfg.task) == 66):
        raise UsageError(f"task {cfg.task!r} is not a run spec's 0x digest: `trainer init --run-spec run.toml` "
                         'publishes one and prints it (on the devnet, task = "@init" takes it)')
    base = cfg.base_checkpoint_digest()
    if not kubo_api:
        raise UsageError("no --kubo-api given and no devnet is up: pool create reads the run spec and the base "
                         "checkpoint from IPFS before it creates the pool")
    from ledger_client.ipfs.checkpoints.fetch import fetch_manifest

    with KuboClient(kubo_api) as kubo:
        try:
            spec = fetch_run_spec(kubo, cfg.task_ref(), timeout=timeout)
        except (KuboNotFound, KuboTimeout, ContentError) as exc:
            raise UsageError(f"task {cfg.task}: no run spec on IPFS within {timeout:.0f} s ({describe_error(exc)}); "
                             "nothing was created") from None
        except ValidationError as exc:
            raise UsageError(f"task {cfg.task} is not a well-formed run spec ({describe_error(exc)}); "
                             "nothing was created") from None
        try:
            fetch_manifest(kubo, base, timeout=timeout)
        except (KuboNotFound, KuboTimeout, CheckpointError) as exc:
            raise UsageError(f"base_checkpoint {hex_text(base)}: no readable checkpoint manifest on IPFS within "
                             f"{timeout:.0f} s ({describe_error(exc)}); nothing was created") from None
    return spec
