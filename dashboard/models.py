"""The explorer's JSON answers as pydantic models: each API route declares one, so /openapi.json documents it.

The views (dashboard/views.py, court.py, evidence.py) build these models; app.py serves them with
`response_model_exclude_unset`, so a field that a view leaves out (a default below: a pool's court figures on a pool
the court does not judge, a case's dispute deadline before its first verdict) is left out of the JSON, as before,
and a field it sets to None is a JSON null. Every other field has no default: a view must name it.

The wire format:
  - amounts (`Wei`) are decimal strings: a uint256 has more digits than a JSON number keeps;
  - addresses are 0x-hex as the chain gives them (checksummed), ids, digests and hashes 0x-hex of 32 bytes;
  - times are the chain's (block timestamps, Unix seconds), durations seconds, counts and block numbers integers.

What is read from IPFS is written by whoever put it there (a trainer, a validator): a run spec, an evidence document
and a summary are passed through as `JsonValue` (any JSON, nothing assumed of it), and what the explorer derives
from them (a curve point, an evidence document explained) keeps only values of the kind its field names.
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

Wei = Annotated[str, Field(pattern=r"^-?[0-9]+$", description="an amount in wei (uint256) as a decimal string")]
Address = Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{40}$", description="an account or contract address")]
Hex32 = Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{64}$",
                             description="32 bytes as 0x-hex: a work id, a digest, a transaction or block hash")]
Number = int | float
Status = Literal["pending", "accepted", "rejected", "paid", "expired"]
CaseStateName = Literal["pending", "verdict", "disputed", "final", "void"]
Verdict = Literal["accepted", "challenged"]
CreditKind = Literal["stand-in", "dispute share", "verdict fee", "bounty", "credit"]


class Model(BaseModel):
    """An answer or a part of one: the fields named here and no others (also when a view sets one later)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def given_fields(model: BaseModel) -> dict[str, object]:
    """The fields (and extra numbers) a model was given, not its defaults: to build a larger answer from a smaller
    one (a work from its submission) that leaves out what the smaller one left out."""
    return {name: getattr(model, name) for name in model.model_fields_set} | (model.model_extra or {})


T = TypeVar("T")

WORST_COMPLETIONS = 3
"""Failing completions an evidence page shows in full; the others are a click away."""


class Page(Model, Generic[T]):
    """One page of a list: `items` from `offset`, at most `limit` of `total`."""

    items: list[T]
    total: int
    offset: int
    limit: int


class ErrorAnswer(Model):
    """An unknown pool, worker, work or evidence (404), a malformed id (400), a bad query value (422)."""

    error: str


class At(Model):
    """Where an event happened: its block, the block's time, its transaction."""

    block: int
    time: int
    tx_hash: Hex32


class AtFields(TypedDict):
    """An `At`'s fields, to spread into the answers that carry them inline."""

    block: int
    time: int
    tx_hash: str


# ------------------------------------------------------------------ status


class StatusAnswer(Model):
    chain_head: int | None = Field(description="None while the RPC is unreachable")
    events: int = Field(description="events in the index")
    indexed_block: int | None = Field(None, description="the last block indexed (absent without an indexer)")
    last_error: str | None = Field(None, description="the last poll's error, None once a poll succeeds")
    lag_blocks: int | None = Field(None, description="chain head minus the last indexed block")


# ------------------------------------------------------------------ pools


class SubmissionCounts(Model):
    pending: int
    accepted: int
    rejected: int
    paid: int
    expired: int


class LivePool(Model):
    """`ComputePool.getPool`, read live (None while the RPC is unreachable)."""

    owner: Address
    trainer: Address
    status: Literal["none", "active", "closed"]
    latest_step: int
    budget: Wei
    reserved: Wei
    min_stake: Wei
    reward_per_sample: Wei
    slash_amount: Wei
    bounty_bps: int
    challenge_window_s: int
    reward_lock_s: int
    async_level: int
    task_ref: Hex32
    base_checkpoint: Hex32
    max_samples_per_work: int
    spot_check_bps: int
    active: bool


class PoolSummary(Model):
    pool_id: int
    owner: Address
    trainer: Address
    task_ref: Hex32
    created_block: int
    latest_checkpoint_step: int | None
    submissions: SubmissionCounts
    workers: int = Field(description="workers that are members now")
    state: LivePool | None


class Pool(PoolSummary):
    run_spec: JsonValue = Field(description="the run spec as put on IPFS (None until fetched); not validated here")
    slashed_total: Wei
    validators: list[Address] = Field(description="the pool's allowed validators (a court pool has none)")
    court: bool = Field(description="whether the ValidatorCourt judges the pool")


class Manifest(Model):
    """What the index keeps of a checkpoint manifest (validated when fetched: protocol.manifest)."""

    step: int
    parent: str | None
    dtype: str
    shards: int
    total_bytes: int
    metrics: str | None = Field(description="CID of the trainer's metrics object")


class Checkpoint(Model):
    step: int
    manifest_digest: Hex32
    block: int
    tx_hash: Hex32
    manifest: Manifest | None
    manifest_error: str | None


class CurvePoint(Model):
    """One step's metrics as the trainer put them on IPFS: these fields (None when not published or not a number)
    and any other number the object holds, under its own name."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Number]

    reward: Number | None
    batch_reward: Number | None
    accuracy: Number | None
    clipped_fraction: Number | None
    staleness_mean: Number | None
    staleness_max: Number | None
    loss: Number | None
    is_weight_mean: Number | None
    is_weight_max: Number | None
    is_weight_min: Number | None
    is_truncated_fraction: Number | None
    mean_ratio: Number | None
    files_consumed: Number | None
    rejected_files: Number | None
    kl: Number | None
    entropy: Number | None
    step: int
    metrics_cid: str


class TrainerPoint(CurvePoint):
    consumed_total: Number = Field(description="files consumed up to this step")
    accepted_by_then: int = Field(description="works accepted by the checkpoint's block")
    rejected_by_then: int
    batch_groups: int | None = Field(description="the groups the step trained on (its staleness histogram's sum)")
    no_reward: str | None = Field(description="why a step has no reward (the mean over the rollouts taken in since "
                                              "the previous step); None when it has one")


class Trainer(Model):
    pool_id: int
    trainer: Address
    points: list[TrainerPoint]
    latest_step: int | None
    consumed_total: Number
    accepted_total: int
    rejected_total: int


class PoolWorker(Model):
    worker: Address
    joined_block: int
    member: bool
    ejected: bool
    submissions: SubmissionCounts
    slashed: Wei


class PoolValidator(Model):
    validator: Address
    allowed: bool
    attested: int
    challenged: int


class Submission(Model):
    work_id: Hex32
    pool_id: int
    worker: Address
    step: int
    n_samples: int
    status: Status
    block: int
    time: int | None
    tx_hash: Hex32
    reason: str | None = Field(description="the challenge's reason (a protocol.verdicts.Reason name)")
    evidence_digest: Hex32 | None
    validator: Address | None = Field(description="the validator whose verdict the pool recorded")
    case_state: CaseStateName | None = Field(description="a court pool's case state")
    judge: Address | None = Field(description="a court pool's validator that gave the verdict")
    slashed: Wei | None = Field(None, description="the worker's slash (only on a rejected work)")


class PoolVerdict(Model):
    work_id: Hex32
    verdict: Verdict
    validator: Address
    block: int
    tx_hash: Hex32
    reason: str | None
    reason_code: int | None
    evidence_digest: Hex32 | None
    slashed: Wei | None


class Slash(Model):
    worker: Address
    challenger: Address
    amount: Wei
    bounty: Wei
    block: int
    time: int
    tx_hash: Hex32
    work_id: Hex32
    pool_id: int
    reason: str | None
    evidence_digest: Hex32 | None
    judge: Address | None


class Claim(Model):
    worker: Address
    amount: Wei
    works: int
    work_ids: list[Hex32]
    block: int
    time: int
    tx_hash: Hex32


class Throughput(Model):
    submissions_per_min: float | None
    samples_per_min: float | None
    accepted_samples_per_min: float | None


class Latency(Model):
    """Seconds from submission (nearest-rank percentiles of block times; None without works)."""

    n: int
    p50: int | None
    p99: int | None


class Backlog(Model):
    awaiting_verdict: int
    awaiting_finality: int


class CaseCounts(Model):
    pending: int
    verdict: int
    disputed: int
    final: int
    void: int


class DisputeCounts(Model):
    total: int
    open: int
    overturned: int
    upheld: int
    void: int


class PoolStats(Model):
    pool_id: int
    budget: Wei | None
    reserved: Wei | None
    fee_budget: Wei | None
    submissions: int
    samples: int
    accepted_samples: int
    span_s: int
    throughput: Throughput
    verdict_latency_s: Latency
    finality_latency_s: Latency
    backlog: Backlog
    status: SubmissionCounts
    adversary_rate: float | None = Field(description="rejected / judged")
    rewards_paid: Wei | None
    slashed_total: Wei
    cases: CaseCounts | None = Field(None, description="a court pool's (absent otherwise), as are the next three")
    disputes: DisputeCounts | None = None
    fees_paid: Wei | None = None
    validator_penalties: Wei | None = None


# ------------------------------------------------------------------ the court


class CourtParams(Model):
    """The pool's `CourtConfigured` parameters (windows and periods in seconds)."""

    validator_bond: Wei
    verdict_fee: Wei
    dispute_bond: Wei
    non_voter_penalty: Wei
    silence_penalty: Wei
    assigned_window: int
    verdict_window: int
    dispute_window: int
    commit_period: int
    reveal_period: int
    committee_size: int
    wrong_verdict_slash: Wei
    activation_delay: int


class ValidatorCounts(Model):
    registered: int
    ever: int


class Court(Model):
    pool_id: int
    court: Address | None
    params: CourtParams
    exit_delay_s: int
    fee_budget: Wei | None
    fees_funded: Wei
    fees_paid: Wei
    cases: CaseCounts
    disputes: DisputeCounts
    validators: ValidatorCounts
    penalties: dict[str, Wei] = Field(description="penalties by reason")
    penalties_total: Wei


class CaseSummary(Model):
    work_id: Hex32
    pool_id: int
    worker: Address
    state: CaseStateName
    submitted: At
    judge: Address | None
    first_verdict: Verdict | None
    reason: str | None
    disputer: Address | None
    overturned: bool | None
    final: Verdict | None
    void: str | None = Field(description="why the case was voided")


class Assignment(Model):
    validator: Address | None
    recorded: At | None
    seed_block: int
    seed_block_hash: Hex32 | None
    set_at_time: int
    rule: str


class Deadlines(Model):
    """Chain times; those of a stage the case has not reached are absent."""

    assigned_until: int
    verdict_until: int
    dispute_until: int | None = None
    committee_draw_until: int | None = None
    commit_until: int | None = None
    reveal_until: int | None = None


class FirstVerdict(Model):
    judge: Address
    accepted: bool
    block: int
    time: int
    tx_hash: Hex32
    reason: str | None
    reason_code: int | None
    evidence_digest: Hex32 | None
    stand_in: bool
    silent_assignee_penalty: Wei


class SeedInputs(Model):
    dispute_block: int
    seed_block: int | None
    seed_block_hash: Hex32 | None
    round: int
    seed: Hex32 | None
    rule: str
    set_at_time: int
    size: int
    excluded: str


class Committee(Model):
    members: list[Address]
    round: int
    block: int
    time: int
    tx_hash: Hex32
    seed_inputs: SeedInputs


class Vote(Model):
    voter: Address
    committed: At | None
    revealed: At | None
    vote: Literal["valid", "invalid"] | None
    with_majority: bool | None
    penalty: Wei | None


class Resolution(Model):
    work_valid: bool
    overturned: bool
    votes_valid: int
    votes_invalid: int
    block: int
    time: int
    tx_hash: Hex32


class Reopened(At):
    round: int | None


class FinalOutcome(Model):
    final: Verdict
    owner: Address = Field(description="the judge whose verdict became final (paid the verdict fee)")
    fee: Wei
    block: int
    time: int
    tx_hash: Hex32


class VoidOutcome(Model):
    final: Literal["void"]
    why: str | None
    block: int
    time: int
    tx_hash: Hex32


class Penalty(Model):
    party: Address
    why: str | None
    why_code: int
    amount: Wei
    block: int
    time: int
    tx_hash: Hex32


class Payment(Model):
    to: Address
    amount: Wei
    kind: CreditKind
    block: int
    time: int
    tx_hash: Hex32


class PoolVerdictEvent(Model):
    event: Literal["WorkAccepted", "WorkChallenged", "WorkExpired"]
    block: int
    time: int
    tx_hash: Hex32
    reason: str | None


class WorkerSlash(Model):
    amount: Wei
    bounty: Wei
    challenger: Address
    block: int
    time: int
    tx_hash: Hex32


# ------------------------------------------------------------------ a verdict's reason (dashboard/evidence.py)


class UnreadableExplanation(Model):
    kind: Literal["unreadable"]
    summary: str


class FindingExplanation(Model):
    """A document that names no reason (a dispute's "every check passed")."""

    kind: Literal["finding"]
    summary: str
    validator: str | None


class FailingCompletion(Model):
    completion: int
    chunks: list[int] = Field(description="its failing proof chunks")
    positions: list[int] = Field(description="its failing token positions (the first failing completion's)")


class CheckCount(Model):
    what: str = Field(description="a measured quantity (a TOPLOC chunk's exponent matches, mantissa error, …)")
    failing: int = Field(description="how many of the measured values fail it")


class FailingSummary(Model):
    """The failing completions at a glance: how many of how many, the proof chunks, the measured quantities that
    fail, and the worst few (the most failing chunks, then token positions); the rest behind them."""

    completions: int = Field(description="failing completions")
    of: int | None = Field(description="the file's completions (the spot check's n; None when the document omits it)")
    checked: int | None = Field(description="the completions the expensive checks ran on (the spot check's m)")
    chunks: int = Field(description="failing proof chunks over every failing completion")
    by_check: list[CheckCount] = Field(description="measured quantities that fail, with how many values fail each")
    worst: list[int] = Field(description=f"the {WORST_COMPLETIONS} completions with the most failing chunks or positions")


class Measurement(Model):
    what: str
    completion: int | None
    chunk: int | None
    measured: JsonValue = Field(description="a number, or the value a file named (identity checks)")
    threshold: JsonValue
    rule: str
    passes: bool | None


class SpotCheckDraw(Model):
    """An evidence document's spot-check draw, re-derived: `verified` says whether its indices and randomness are
    the ones the block hash and the work id give (None when nothing was drawn)."""

    q: float | None
    spot_check_bps: int | None
    n: int | None
    m: int | None
    indices: list[int] | None
    submission_block: int | None
    seed_block: int | None
    block_hash: str | None
    randomness: str | None
    min_checked_tokens: int | None = None
    verified: bool | None


class EvidenceExplanation(Model):
    kind: Literal["evidence"]
    reason: str | None
    reason_code: int | None
    check: str = Field(description="the check that failed")
    meaning: str
    summary: str = Field(description="the validator's words, or the meaning")
    validator: str | None
    failing_completions: list[FailingCompletion]
    failing_summary: FailingSummary
    measurements: list[Measurement]
    thresholds: JsonValue = Field(description="the thresholds as the document states them")
    spot_check: SpotCheckDraw | None


Explanation = Annotated[UnreadableExplanation | FindingExplanation | EvidenceExplanation,
                        Field(discriminator="kind")]


class EvidenceAnswer(Model):
    digest: Hex32
    document: JsonValue = Field(description="the document as the validator put it on IPFS (None until fetched): "
                                            "anyone's JSON, passed through as it is")
    available: bool
    error: str | None = Field(description="the last fetch's error")
    explanation: Explanation | None


class ChecksPassed(Model):
    """What a protocol validator checked before attesting, and which completions got the expensive checks."""

    all_completions: list[str]
    spot_checks: list[str]
    n: int
    m: int
    q: float
    spot_check_bps: int
    submission_block: int
    seed_block: int
    block_hash: Hex32 | None
    randomness: Hex32 | None
    indices: list[int] | None
    min_checked_tokens: int = 0
    """The run spec's floor of checked tokens: past ⌈q·n⌉ the draw depends on the file's completion lengths, which
    the explorer does not read, so `indices` is None when the floor may have drawn more."""


class Dispute(Model):
    disputer: Address
    evidence_digest: Hex32
    block: int
    time: int
    tx_hash: Hex32
    committees: list[Committee]
    votes: list[Vote]
    seats: int
    resolved: Resolution | None
    reopened: list[Reopened]
    evidence: Explanation | None = Field(None, description="the dispute's evidence explained (on a work's page)")


class CourtCase(Model):
    work_id: Hex32
    pool_id: int
    worker: Address
    state: CaseStateName | None
    n_samples: int
    step: int
    submitted: At
    now: int | None = Field(description="the chain's time (the newest block's)")
    params: CourtParams
    assignment: Assignment
    deadlines: Deadlines
    first_verdict: FirstVerdict | None
    disputes: list[Dispute]
    outcome: Annotated[FinalOutcome | VoidOutcome, Field(discriminator="final")] | None
    payments: list[Payment]
    penalties: list[Penalty]
    worker_slashed: WorkerSlash | None
    pool_verdict: PoolVerdictEvent | None
    paid: At | None


# ------------------------------------------------------------------ workers and works


class WorkerStake(Model):
    bonded: Wei = Field(description="free bonded stake")
    allocated: Wei = Field(description="locked for the pools")
    unbonding: Wei
    unbonding_ready_at: int


class Member(Model):
    member: bool
    next_nonce: int
    open_works: int
    allocation: Wei
    required: Wei


class Worker(Model):
    worker: Address
    pools: list[int]
    stake: WorkerStake | None
    members: dict[str, Member | None] = Field(description="pool id → the worker's record in it (live)")
    submissions: SubmissionCounts
    owed: Wei
    claimable: Wei
    claimed: Wei
    slashed: Wei
    slashes: list[Slash]
    open_works: list[Submission]


class TimelineEntry(Model):
    event: str
    block: int
    time: int
    after_s: int = Field(description="seconds after the submission")
    tx_hash: Hex32
    who: Address | None
    text: str


class Work(Submission):
    evidence: EvidenceAnswer | None
    explanation: Explanation | None
    checks: ChecksPassed | None
    case: CourtCase | None = Field(None, description="a court pool's case (absent otherwise)")
    timeline: list[TimelineEntry]


# ------------------------------------------------------------------ validators of the court


class BondWithdrawn(Model):
    amount: Wei
    block: int
    time: int
    tx_hash: Hex32


class Registration(Model):
    registered: bool
    index: int | None
    registered_at: At | None
    deregistered_at: At | None
    exit_at: int | None
    bond_withdrawn: BondWithdrawn | None


class LiveValidator(Model):
    """`ValidatorCourt.getValidator`, read live: free = locked − reserved."""

    index: int
    registered_at: int
    deregistered_at: int
    locked: Wei
    reserved: Wei
    free: Wei


class ReservedCase(Model):
    model_config = ConfigDict(populate_by_name=True)  # "as" is a keyword: built as as_, served as "as"

    work_id: Hex32
    as_: Literal["judge", "disputer", "committee member"] = Field(alias="as")
    amount: Wei


class Reserved(Model):
    total: Wei
    cases: list[ReservedCase]


class VerdictCounts(Model):
    given: int
    accepted: int
    challenged: int
    final: int
    disputed: int
    overturned: int
    upheld: int


class DisputesFiled(Model):
    filed: int
    won: int
    lost: int
    void: int
    open: int


class CommitteeCounts(Model):
    seats: int
    committed: int
    revealed: int
    missed: int
    with_majority: int
    with_minority: int


class ValidatorInPool(Model):
    pool_id: int
    validator: Address
    registered: bool
    index: int | None
    registered_at: At | None
    deregistered_at: At | None
    exit_at: int | None
    bond_withdrawn: BondWithdrawn | None
    live: LiveValidator | None
    locked_from_events: Wei
    dispute_bonds_locked: Wei
    bond_added: Wei
    reserved_by_open_cases: Reserved
    verdicts: VerdictCounts
    disputes: DisputesFiled
    committee: CommitteeCounts
    penalties: dict[str, Wei]
    penalties_total: Wei
    earned: dict[str, Wei] = Field(description="credits by kind")
    earned_total: Wei


class CourtValidator(Model):
    """A row of a pool's bonded validators (the fields of ValidatorInPool a table shows)."""

    validator: Address
    registered: bool
    index: int | None
    live: LiveValidator | None
    verdicts: VerdictCounts
    disputes: DisputesFiled
    committee: CommitteeCounts
    penalties_total: Wei
    earned_total: Wei
    exit_at: int | None


class CourtAccount(Model):
    credits: Wei = Field(description="credits not yet withdrawn")
    court_locked: Wei = Field(description="stake the court holds locked")
    bonded: Wei = Field(description="free bonded stake")


class Withdrawal(Model):
    amount: Wei
    block: int
    time: int
    tx_hash: Hex32


class Validator(Model):
    validator: Address
    pools: list[ValidatorInPool]
    account: CourtAccount | None
    withdrawn: list[Withdrawal]
    withdrawn_total: Wei
    earned_total: Wei
    penalties_total: Wei


class ValidatorVerdict(Model):
    work_id: Hex32
    pool_id: int
    block: int
    time: int
    tx_hash: Hex32
    verdict: Verdict
    reason: str | None
    state: CaseStateName
    disputer: Address | None
    overturned: bool | None
    earned: Wei
    lost: Wei


class Credit(Model):
    to: Address
    amount: Wei
    kind: CreditKind
    work_id: Hex32 | None
    pool_id: int | None
    block: int
    time: int
    tx_hash: Hex32


class EarningPoint(Model):
    """A credit or a penalty, with the running totals after it."""

    to: Address
    amount: Wei
    kind: CreditKind | Literal["penalty"]
    work_id: Hex32 | None
    pool_id: int | None
    block: int
    time: int
    tx_hash: Hex32
    change: Wei = Field(description="+amount, or −amount for a penalty")
    what: str | None
    earned: Wei
    lost: Wei
    net: Wei


class ValidatorEarnings(Model):
    validator: Address
    points: list[EarningPoint]
    earned: Wei
    lost: Wei
    net: Wei
