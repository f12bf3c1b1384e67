"""Read-only questions every role asks the ledger: a worker's submissions, rewards, a pool's state."""

from __future__ import annotations

import time

from ledger_client.chain.ledger import Ledger
from protocol.digest import Digest
from protocol.pool import PoolState, PoolStatus, Work, WorkStatus


def pool_state(ledger: Ledger, pool_id: int) -> PoolState:
    """The pool's parameters and state (raises UnknownPool)."""
    return decode_pool(pool_id, ledger.pool.get_pool(pool_id))


def decode_pool(pool_id: int, raw: tuple) -> PoolState:
    """`ComputePool.getPool`'s return value as a PoolState: the one place that knows its layout."""
    owner, trainer, status, latest, budget, reserved, params = raw
    (_, _, min_stake, reward_per_sample, slash_amount, bounty_bps, challenge_window, reward_lock, async_level, task_ref,
     base_checkpoint) = params
    return PoolState(
        pool_id=pool_id, owner=owner, trainer=trainer, status=PoolStatus(status), latest_step=latest, budget=budget,
        reserved=reserved, min_stake=min_stake, reward_per_sample=reward_per_sample, slash_amount=slash_amount,
        bounty_bps=bounty_bps, challenge_window_s=challenge_window, reward_lock_s=reward_lock, async_level=async_level,
        task_ref=Digest(task_ref), base_checkpoint=Digest(base_checkpoint),
    )


def get_work(ledger: Ledger, work_id: bytes) -> Work:
    """One submission (raises UnknownWork)."""
    worker, pool_id, step, n_samples, submitted_at, status, reward = ledger.pool.get_work(work_id)
    return Work(work_id=bytes(work_id), worker=worker, pool_id=pool_id, step=step, n_samples=n_samples,
                submitted_at=submitted_at, status=WorkStatus(status), reward=reward)


def works_of(ledger: Ledger, worker: str, pool_id: int | None = None) -> list[Work]:
    """Every submission of `worker` (optionally in one pool), with its current status."""
    filters = {"worker": worker} | ({"poolId": pool_id} if pool_id is not None else {})
    logs = ledger.pool.contract.events.WorkSubmitted.get_logs(argument_filters=filters,
                                                              from_block=ledger.deployment.block)
    return [get_work(ledger, bytes(log["args"]["workId"])) for log in logs]


def claimed_total(ledger: Ledger, worker: str) -> int:
    """Sum of rewards `worker` has claimed."""
    logs = ledger.pool.contract.events.RewardsClaimed.get_logs(argument_filters={"worker": worker},
                                                               from_block=ledger.deployment.block)
    return sum(log["args"]["amount"] for log in logs)


def chain_time(ledger: Ledger) -> int:
    """Timestamp of the latest block (the clock the contracts use; devnets may run ahead of wall time)."""
    return ledger.w3.eth.get_block("latest")["timestamp"]


def claimable(ledger: Ledger, works: list[Work], now: int | None = None) -> list[Work]:
    """Accepted works whose reward lock has passed."""
    now = chain_time(ledger) if now is None else now
    locks: dict[int, int] = {}
    out = []
    for w in works:
        if w.status != WorkStatus.ACCEPTED:
            continue
        if w.pool_id not in locks:
            locks[w.pool_id] = pool_state(ledger, w.pool_id).reward_lock_s
        if now >= w.submitted_at + locks[w.pool_id]:
            out.append(w)
    return out


def wait_for(predicate, timeout: float, interval: float = 0.2) -> bool:
    """Poll `predicate()` until true or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
