"""A pool as the chain records it: the status of a submission, one submission, the pool's parameters and
state — decoded once from the contract's views (ledger_client.chain.queries), read by every role."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from protocol.digest import Digest


VALIDATOR_FETCH_TIMEOUT_S = 20.0
"""`validator start --fetch-timeout`'s default: seconds one fetch attempt of a rollout file may take."""
VALIDATOR_VERDICT_MARGIN_S = 30.0
"""`validator start --verdict-margin`'s default: seconds kept before a window closes to send the verdict or dispute.
A court window in which a validator fetches a file and then answers (the verdict window, the dispute window, the
commit period) must be at least these two added up for a validator with the defaults to serve it (docs/protocol.md
R9.21): `pool create` refuses shorter ones."""


class PoolStatus(IntEnum):
    """Mirror of `IComputePool.PoolStatus`."""

    NONE = 0
    ACTIVE = 1
    CLOSED = 2


class CaseState(IntEnum):
    """Mirror of `IValidatorCourt.CaseState`: a court pool's submission goes Pending → Verdict → Final,
    or Verdict → Disputed → Final; the ComputePool learns the verdict only at Final. Void: no verdict
    (nobody judged in the verdict window, or no committee vote) — the work expires in the pool."""

    NONE = 0
    PENDING = 1
    VERDICT = 2
    DISPUTED = 3
    FINAL = 4
    VOID = 5


class WorkStatus(IntEnum):
    """Mirror of `IComputePool.WorkStatus`."""

    NONE = 0
    PENDING = 1
    ACCEPTED = 2
    REJECTED = 3
    PAID = 4
    EXPIRED = 5


@dataclass(frozen=True)
class Work:
    """One submission as the chain sees it now."""

    work_id: bytes
    worker: str
    pool_id: int
    step: int
    n_samples: int
    submitted_at: int
    status: WorkStatus
    reward: int
    nonce: int = 0
    """The worker's submission nonce in the pool (the work id derives from it)."""


@dataclass(frozen=True)
class PoolState:
    """A pool's parameters and state. `async_level` is the contract's `maxStaleness`: work may use a
    policy at most this many steps older than the newest one."""

    pool_id: int
    owner: str
    trainer: str
    status: PoolStatus
    latest_step: int
    budget: int
    reserved: int
    min_stake: int
    reward_per_sample: int
    slash_amount: int
    bounty_bps: int
    challenge_window_s: int
    reward_lock_s: int
    async_level: int
    task_ref: Digest
    base_checkpoint: Digest
    max_samples_per_work: int = 0
    spot_check_bps: int = 10_000
    """q in basis points: the fraction of each file's completions that get the expensive checks
    (protocol.spotcheck)."""

    @property
    def active(self) -> bool:
        return self.status == PoolStatus.ACTIVE


DEFAULT_ASYNC_LEVEL = 2
"""INTELLECT-2's async level: rollouts may come from policies up to two steps old."""


def versions_to_keep(async_level: int) -> int:
    """How many policy versions a participant keeps (pinned, loaded or on disk): the newest one and the
    `async_level` before it, which is every version a submission may still use."""
    if async_level < 0:
        raise ValueError(f"async_level must be >= 0, got {async_level}")
    return async_level + 1
