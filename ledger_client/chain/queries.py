"""Read-only questions every role asks the ledger: a worker's submissions, rewards, a pool's state."""

from __future__ import annotations

import time

from ledger_client.chain.bindings import MemberView, PoolView, ValidatorCourt, ValidatorView
from ledger_client.chain.errors import LedgerError, UnknownPool
from ledger_client.chain.ledger import Ledger
from protocol.digest import Digest
from protocol.pool import PoolState, PoolStatus, Work, WorkStatus
from protocol.submission import SubmissionBinding

ZERO_ADDRESS = "0x" + "00" * 20
"""The address the contracts answer for "nobody" (`ValidatorCourt.assignedValidator` before its draw, or when no
validator of the case's set is eligible)."""


def pool_state(ledger: Ledger, pool_id: int) -> PoolState:
    """The pool's parameters and state (raises UnknownPool, also for an id no uint256 holds)."""
    if not 0 <= pool_id < 2**256:
        raise UnknownPool({"poolId": pool_id}, "getPool")
    return decode_pool(pool_id, ledger.pool.get_pool(pool_id))


def next_binding(ledger: Ledger, pool_id: int, member: MemberView | None = None) -> SubmissionBinding:
    """The binding of the ledger account's next submission to the pool: the chain's next nonce, at the step the
    chain pinned for it, seeded by the hash of the pinning block (ComputePool's pin rule) — nothing chosen here.
    `member`: the account's record in the pool, if just read (only the account's own submission changes it)."""
    member = member or ledger.pool.get_member(pool_id, ledger.address)
    seed_block_hash = Digest(bytes(ledger.w3.eth.get_block(member.pinned_block)["hash"]))
    d = ledger.deployment
    return SubmissionBinding(chain_id=d.chain_id, pool_contract=d.compute_pool, pool_id=pool_id, worker=ledger.address,
                             step=member.pinned_step, nonce=member.next_nonce, seed_block_hash=seed_block_hash)


def decode_pool(pool_id: int, view: PoolView) -> PoolState:
    """`ComputePool.getPool`'s typed view as the PoolState every role reads."""
    p = view.params
    return PoolState(
        pool_id=pool_id, owner=view.owner, trainer=view.trainer, status=PoolStatus(view.status),
        latest_step=view.latest_step, budget=view.budget, reserved=view.reserved, min_stake=p.min_stake,
        reward_per_sample=p.reward_per_sample, slash_amount=p.slash_amount, bounty_bps=p.bounty_bps,
        challenge_window_s=p.challenge_window, reward_lock_s=p.reward_lock, async_level=p.max_staleness,
        task_ref=Digest(p.task_ref), base_checkpoint=Digest(p.base_checkpoint),
        max_samples_per_work=p.max_samples_per_work, spot_check_bps=p.spot_check_bps,
    )


def pool_created_in(ledger: Ledger, pool_id: int) -> bytes:
    """Hash of the block whose `PoolCreated` made the pool: names this pool instance apart from a pool with
    the same id on another run of a devnet (raises LedgerError if there is none)."""
    created = ledger.logs.first(ledger.pool.contract.events.PoolCreated, {"poolId": pool_id}, ledger.deployment.block)
    if created is None:
        raise LedgerError(f"pool {pool_id} was never created on this deployment")
    return bytes(created["blockHash"])


def court_of(ledger: Ledger, pool_id: int) -> ValidatorCourt | None:
    """This deployment's ValidatorCourt when it judges the pool (its verdicts reach the pool only
    when final), else None (the pool's own validators judge it)."""
    if ledger.court is not None and ledger.pool.judge_of(pool_id) == ledger.court.address:
        return ledger.court
    return None


def court_validators(ledger: Ledger, court: ValidatorCourt, pool_id: int) -> list[str]:
    """The validators registered in the court for the pool and not deregistered (from its `ValidatorRegistered`
    events, read in pages, and each one's `getValidator` now), in registration order."""
    seen = dict.fromkeys(log["args"]["validator"] for log in ledger.logs.read(
        court.contract.events.ValidatorRegistered, {"poolId": pool_id}, ledger.deployment.block))
    out = []
    for validator in seen:
        view = court.get_validator(pool_id, validator)
        if view.registered_at and not view.deregistered_at:
            out.append(validator)
    return out


def get_work(ledger: Ledger, work_id: bytes) -> Work:
    """One submission (raises UnknownWork)."""
    v = ledger.pool.get_work(work_id)
    return Work(work_id=bytes(work_id), worker=v.worker, pool_id=v.pool_id, step=v.step, n_samples=v.n_samples,
                submitted_at=v.submitted_at, status=WorkStatus(v.status), reward=v.reward, nonce=v.nonce)


def works_of(ledger: Ledger, worker: str, pool_id: int | None = None) -> list[Work]:
    """Every submission of `worker` (optionally in one pool), from its `WorkSubmitted` events, with its
    current status."""
    filters = {"worker": worker} | ({"poolId": pool_id} if pool_id is not None else {})
    logs = ledger.logs.scan(ledger.pool.contract.events.WorkSubmitted, filters, ledger.deployment.block)
    return [get_work(ledger, bytes(log["args"]["workId"])) for log in logs]


RECENT_BLOCK_SPANS = (256, 4096)
"""A submission's event is looked for in the latest 256 blocks, then 4,096, then back to the deployment (in pages
from the newest, ledger_client.chain.logs): lookups are nearly always of recent work, and a node's log search costs
in proportion to the blocks it scans (on a devnet of 11,000 blocks 10.7 ms against 1.0 ms for the latest 256;
validators and the trainer look up every file)."""


def submitted_event(ledger: Ledger, work_id: bytes):
    """The latest `WorkSubmitted` event of `work_id` (None if no such submission is on-chain), looked up again
    each time so that a reorg that moved it is followed."""
    first, latest = ledger.deployment.block, ledger.w3.eth.block_number
    event, filters = ledger.pool.contract.events.WorkSubmitted, {"workId": bytes(work_id)}
    for span in RECENT_BLOCK_SPANS:
        start = max(first, latest - span)
        if logs := ledger.logs.read(event, filters, start, latest):
            return logs[-1]
        if start == first:
            return None
    return ledger.logs.newest(event, filters, first)


def rollout_digest_of(ledger: Ledger, work_id: bytes) -> Digest | None:
    """The rollout-file digest a work was submitted with (kept only in its `WorkSubmitted` event);
    None if no such submission is on-chain."""
    event = submitted_event(ledger, work_id)
    return Digest(bytes(event["args"]["rolloutDigest"])) if event else None


def spot_check_block(ledger: Ledger, work_id: bytes, confirmations: int = 0, near_block: int = 0,
                     near_hash: bytes | None = None, head: int | None = None) -> tuple[int, bytes] | None:
    """(B, hash of block B + 1) for the work whose `WorkSubmitted` event is in block B — the block hash its
    spot-check randomness comes from (protocol.spotcheck) — once B + 1 has `confirmations` blocks on top
    of it; None while it has not (or no such submission is on-chain). `near_block` (the event's block as
    first seen) narrows the log search; the event is looked up again so a reorg that moved it is followed.
    With the hash that block had when the event was seen (`near_hash`) and the latest block's number (`head`),
    one request: while the canonical B + 1's parent is that block, the event is still in it."""
    if near_hash is not None and head is not None and near_block > 0:
        if head < near_block + 1 + confirmations:
            return None
        child = ledger.w3.eth.get_block(near_block + 1)
        if bytes(child["parentHash"]) == bytes(near_hash):
            return near_block, bytes(child["hash"])
    start = max(ledger.deployment.block, near_block - 64)
    event = ledger.logs.newest(ledger.pool.contract.events.WorkSubmitted, {"workId": bytes(work_id)}, start)
    if event is None:
        return None
    block = event["blockNumber"]
    if ledger.w3.eth.block_number < block + 1 + confirmations:
        return None
    return block, bytes(ledger.w3.eth.get_block(block + 1)["hash"])


def claimed_total(ledger: Ledger, worker: str) -> int:
    """Sum of rewards `worker` has claimed."""
    return sum(amount for amount, _ in _claims(ledger, worker))


def claimed_works(ledger: Ledger, worker: str) -> set[bytes]:
    """Ids of the works whose rewards `worker` has claimed (named by `RewardsClaimed`)."""
    return {bytes(w) for _, ids in _claims(ledger, worker) for w in ids}


def _claims(ledger: Ledger, worker: str) -> list[tuple[int, list[bytes]]]:
    logs = ledger.logs.scan(ledger.pool.contract.events.RewardsClaimed, {"worker": worker}, ledger.deployment.block)
    return [(log["args"]["amount"], list(log["args"]["workIds"])) for log in logs]


def eligible_judge(view: ValidatorView, activation_delay: int, now: int) -> bool:
    """Whether a court validator (its `getValidator` view) may judge work submitted at `now`: registered, not
    leaving, and registered more than the court's activation delay before (a case is judged by the set as it was
    that long before its submission)."""
    return bool(view.index) and not view.deregistered_at and now > view.registered_at + activation_delay


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
