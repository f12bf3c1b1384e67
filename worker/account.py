"""The worker's account on the ledger: its key, stake (free bonded, allocated per pool, unbonding), status,
rewards."""

from __future__ import annotations

import argparse

from cli.devnet import load_devnet_info
from cli.errors import UsageError
from cli.options import resolve_chain_args
from ledger_client.chain.bindings import MemberView
from ledger_client.chain.keys import load_account
from ledger_client.chain.ledger import Ledger, allocation_required
from ledger_client.chain.errors import InsufficientTokens
from ledger_client.chain.queries import claimable, claimed_total, get_work, pool_state, works_of
from protocol.digest import WorkId, digest_to_cid
from protocol.pool import Work, WorkStatus
from protocol.verdicts import Reason


def open_ledger(args: argparse.Namespace) -> Ledger:
    """The ledger with the worker's key, from the arguments or the devnet (`--devnet-worker N`)."""
    rpc_url, deployments = resolve_chain_args(args)
    if getattr(args, "devnet_worker", None) is not None and not (args.key or args.keystore):
        devnet = load_devnet_info(args.devnet_dir)
        if devnet is None:
            raise UsageError("--devnet-worker needs a running devnet (run `devnet up`)")
        if not 0 <= args.devnet_worker < len(devnet["workers"]):
            raise UsageError(f"--devnet-worker must be 0..{len(devnet['workers']) - 1}")
        args.key = devnet["workers"][args.devnet_worker]["private_key"]
    account = load_account(args.key, args.keystore, args.password_file)
    return Ledger.open(rpc_url, deployments, account, args.chain_id, args.logs_page_blocks)


def status(ledger: Ledger, pool_id: int | None, explorer: str | None = None) -> dict:
    """Stake, submissions by verdict, rewards owed/claimable/claimed, every challenge with its reason and a link to
    its evidence; with a pool, its current step and the worker's allocation, next nonce and open work there."""
    me = ledger.address
    unbonding, ready_at = ledger.stake.unbonding_of(me)
    works = works_of(ledger, me, pool_id)
    ready = claimable(ledger, works)
    by_status = {s.name.lower(): 0 for s in WorkStatus if s != WorkStatus.NONE}
    for w in works:
        by_status[w.status.name.lower()] += 1
    out = {
        "worker": me,
        "bonded": ledger.stake.bonded_of(me),
        "unbonding": unbonding,
        "unbonding_ready_at": ready_at,
        "token_balance": ledger.token.balance_of(me),
        "submissions": by_status,
        "rewards_owed": sum(w.reward for w in works if w.status == WorkStatus.ACCEPTED),
        "rewards_claimable": sum(w.reward for w in ready),
        "rewards_claimable_at": rewards_unlock_at(ledger, works, ready),
        "rewards_claimed": claimed_total(ledger, me),
    }
    out["challenges"] = challenges_of(ledger, me, pool_id, explorer)
    if pool_id is not None:
        pool = pool_state(ledger, pool_id)
        member = ledger.pool.get_member(pool_id, me)
        out |= {"pool_id": pool_id, "member": member.member, "current_step": pool.latest_step,
                "min_stake": pool.min_stake, "allocation": member.allocation, "allocation_required": member.required,
                "open_works": member.open_works, "next_nonce": member.next_nonce}
    return out


def rewards_unlock_at(ledger: Ledger, works: list[Work], ready: list[Work]) -> int | None:
    """When the next accepted reward still under its pool's reward lock can be claimed (chain time), or None when
    none is waiting: what a worker on a real chain waits for before `worker claim`."""
    ready_ids = {w.work_id for w in ready}
    waiting = [w for w in works if w.status == WorkStatus.ACCEPTED and w.work_id not in ready_ids]
    locks = {pool: pool_state(ledger, pool).reward_lock_s for pool in {w.pool_id for w in waiting}}
    return min((w.submitted_at + locks[w.pool_id] for w in waiting), default=None)


ALLOCATE_AHEAD = 16
"""Submissions one top-up of the pool allocation covers. Every open submission needs `slashAmount` allocated
(until claimed or slashed), and topping up for one at a time cost three transactions (approve, bond, allocate)
before every `submitWork` (bench.protocol, docs/notes/protocol-price.md)."""


def stake_for_next_submission(ledger: Ledger, pool_id: int, min_stake: int, slash_amount: int,
                              ahead: int = ALLOCATE_AHEAD, member: MemberView | None = None) -> int:
    """Bond and allocate what the account's next submission to the pool needs (after a slash this tops the
    allocation up again), for `ahead` submissions at once when the account holds enough; returns what was added.
    `member`: the account's record in the pool, if just read."""
    member = member or ledger.pool.get_member(pool_id, ledger.address)
    required = allocation_required(member.open_works, min_stake, slash_amount)
    if member.allocation >= required:
        return 0
    try:
        return ledger.ensure_allocation(pool_id, required + (ahead - 1) * slash_amount)
    except InsufficientTokens:  # checked before anything is sent: then only what the next submission needs
        return ledger.ensure_allocation(pool_id, required)


def deallocate_free(ledger: Ledger, pool_id: int) -> int:
    """Return to free bonded stake all of the pool allocation that open work there does not require."""
    member = ledger.pool.get_member(pool_id, ledger.address)
    free = member.allocation - member.required
    if free > 0:
        ledger.pool.deallocate(pool_id, free)
    return max(free, 0)


def claim_all(ledger: Ledger, pool_id: int | None) -> int:
    """Claim every accepted reward whose lock has passed; returns the amount (0 if nothing was claimable)."""
    return _claim(ledger, claimable(ledger, works_of(ledger, ledger.address, pool_id)))


def claim_works(ledger: Ledger, work_ids: list[bytes], now: int | None = None) -> int:
    """Claim those of `work_ids` that are accepted with their lock passed (by `now`, the chain's clock just read; None:
    read it); returns the amount."""
    return _claim(ledger, claimable(ledger, [get_work(ledger, w) for w in work_ids], now))


def _claim(ledger: Ledger, ready: list) -> int:
    if not ready:
        return 0
    before = ledger.token.balance_of(ledger.address)
    ledger.pool.claim([w.work_id for w in ready])
    return ledger.token.balance_of(ledger.address) - before


FEW_WORKS = 16
"""Up to this many works, `challenges_of` asks the node for their challenges by work id (else for the pool's)."""


def challenges_of(ledger: Ledger, worker: str, pool_id: int | None = None, explorer: str | None = None,
                  work_ids: set[bytes] | None = None) -> list[dict]:
    """Every challenge of `worker`'s submissions (or of `work_ids` among them), oldest first: the reason, what it
    was slashed, and where to read why — its evidence document on IPFS (`evidence`, ipfs://CID) and, given the
    explorer's URL, the work's page there (`explain`: the evidence explained, or the dispute that overturned an
    attestation)."""
    mine = work_ids if work_ids is not None else {w.work_id for w in works_of(ledger, worker, pool_id)}
    if not mine:
        return []
    filters = {"poolId": pool_id} if pool_id is not None else {}
    event, start = ledger.pool.contract.events.WorkChallenged, ledger.deployment.block
    if work_ids is not None and len(work_ids) <= FEW_WORKS:  # workId is an indexed topic: the node returns theirs
        logs = ledger.logs.read(event, filters | {"workId": sorted(work_ids)}, start)
    else:
        logs = ledger.logs.scan(event, filters, start)
    out = []
    for log in logs:
        work_id = bytes(log["args"]["workId"])
        if work_id not in mine:
            continue
        code, digest = log["args"]["reasonCode"], bytes(log["args"]["evidenceDigest"])
        try:
            reason = Reason(code).name
        except ValueError:
            reason = f"UNKNOWN_{code}"
        out.append({"work_id": WorkId(work_id).text, "pool_id": log["args"]["poolId"], "reason": reason,
                    "slashed": log["args"]["slashed"], "block": log["blockNumber"],
                    "evidence": None if digest == bytes(32) else f"ipfs://{digest_to_cid(digest)}",
                    "explain": f"{explorer.rstrip('/')}/work/{WorkId(work_id).text}" if explorer else None})
    return out
