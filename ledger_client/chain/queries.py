"""Read-only questions every role asks the ledger: a worker's submissions, rewards, a pool's state."""

from __future__ import annotations

import time

from ledger_client.chain.bindings import PoolView
from ledger_client.chain.ledger import Ledger
from protocol.digest import Digest
from protocol.pool import PoolState, PoolStatus, Work, WorkStatus


def pool_state(ledger: Ledger, pool_id: int) -> PoolState:
    """The pool's parameters and state (raises UnknownPool)."""
    return decode_pool(pool_id, ledger.pool.get_pool(pool_id))


def decode_pool(pool_id: int, view: PoolView) -> PoolState:
    """`ComputePool.getPool`'s typed view as the PoolState every role reads."""
    p = view.params
    return PoolState(
        pool_id=pool_id, owner=view.owner, trainer=view.trainer, status=PoolStatus(view.status),
        latest_step=view.latest_step, budget=view.budget, reserved=view.reserved, min_stake=p.min_stake,
        reward_per_sample=p.reward_per_sample, slash_amount=p.slash_amount, bounty_bps=p.bounty_bps,
        challenge_window_s=p.challenge_window, reward_lock_s=p.reward_lock, async_level=p.max_staleness,
        task_ref=Digest(p.task_ref), base_checkpoint=Digest(p.base_checkpoint),
    )


def get_work(ledger: Ledger, work_id: bytes) -> Work:
    """One submission (raises UnknownWork)."""
    v = ledger.pool.get_work(work_id)
    return Work(work_id=bytes(work_id), worker=v.worker, pool_id=v.pool_id, step=v.step, n_samples=v.n_samples,
                submitted_at=v.submitted_at, status=WorkStatus(v.status), reward=v.reward)


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
