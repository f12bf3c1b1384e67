"""Read-only questions every role asks the ledger: a worker's submissions, rewards, a pool's state."""

from __future__ import annotations

import time

from ledger_client.chain.ledger import Ledger
from protocol.pool import PoolState, Work, WorkStatus


def pool_state(ledger: Ledger, pool_id: int) -> PoolState:
    """The pool's parameters and state (raises UnknownPool)."""
    owner, trainer, status, latest, budget, reserved, p = ledger.pool.get_pool(pool_id)
    return PoolState(pool_id, owner, trainer, status == 1, latest, budget, reserved, p[2], p[3], p[4], p[6], p[7],
                     p[8], bytes(p[9]), bytes(p[10]))


def get_work(ledger: Ledger, work_id: bytes) -> Work:
    """One submission (raises UnknownWork)."""
    v = ledger.pool.get_work(work_id)
    return Work(work_id, v[0], v[1], v[2], v[3], v[4], WorkStatus(v[5]), v[6])


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
