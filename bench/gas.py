"""Gas used by the hot contract calls, on a fresh anvil: `python -m bench.gas`.

Each call is measured in the steady state a running pool is in ("warm storage": the pool,
the worker's registry entry and token balances already exist), i.e. the second occurrence of
the call. `execution` is the receipt's gasUsed minus the intrinsic cost (21000 + calldata),
which is what the budgets below refer to; `total` is the receipt's gasUsed.

Budgets (issue #2): submitWork ≤ 60,000, attest ≤ 40,000, claim ≤ 60,000; (issue 13) the court's first
verdict `court.attest` ≤ 40,000. The `court.*` rows are a pool judged by the ValidatorCourt: register,
attest (by the assigned validator), dispute, drawCommittee, commitVote, revealVote, resolve and finalize;
`submitWork (court pool)` includes the court's submission hook, which opens the case so that a verdict
only updates it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from ledger_client.chain.bindings import CourtParams, PoolParams
from ledger_client.chain.ledger import Ledger, connect
from validator.court import vote_commitment

BUDGETS = {"submitWork": 60_000, "attest": 40_000, "claim": 60_000, "court.attest": 40_000}


def _intrinsic(w3, tx_hash) -> int:
    data = bytes(w3.eth.get_transaction(tx_hash)["input"])
    return 21_000 + sum(4 if b == 0 else 16 for b in data)


def measure() -> dict[str, dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        anvil = start_anvil(Path(tmp) / "anvil.log")
        try:
            return _measure(connect(anvil.rpc_url))
        finally:
            anvil.stop()


def _measure(w3) -> dict[str, dict[str, int]]:
    acc = dev_accounts(10)
    deployment = deploy_contracts(w3, acc[0])
    admin = Ledger(w3, deployment, acc[0])
    for i in (1, 4, 5):
        admin.token.mint(acc[i].address, 10**24)
    owner, trainer, validator = (Ledger(w3, deployment, acc[i]) for i in (1, 2, 3))
    w1, w2 = Ledger(w3, deployment, acc[4]), Ledger(w3, deployment, acc[5])
    params = PoolParams(trainer=acc[2].address, validators=[acc[3].address], min_stake=100 * 10**18,
                        reward_per_sample=10**18, slash_amount=10 * 10**18, bounty_bps=2_000, challenge_window=60,
                        reward_lock=120, max_staleness=2, task_ref=b"\x22" * 32, base_checkpoint=b"\x11" * 32,
                        max_samples_per_work=64, spot_check_bps=10_000)
    owner.pool.create_pool(params)
    pool_id = owner.pool.pool_count()
    owner.token.approve(owner.pool.address, 10**23)
    owner.pool.fund_pool(pool_id, 10**23)
    out: dict[str, dict[str, int]] = {}

    def record(name: str, receipt) -> None:
        total = receipt["gasUsed"]
        out[name] = {"total": total, "execution": total - _intrinsic(w3, receipt["transactionHash"])}

    for w in (w1, w2):
        w.token.approve(w.stake.address, 10**24)
        w.stake.bond(50 * 10**18)
    record("stake", w1.stake.bond(60 * 10**18))  # second bond of the same worker
    w2.stake.bond(60 * 10**18)
    w1.pool.allocate(pool_id, 50 * 10**18)
    record("allocate", w1.pool.allocate(pool_id, 60 * 10**18))  # second allocation to the same pool
    w2.pool.allocate(pool_id, 110 * 10**18)
    trainer.pool.publish_checkpoint(pool_id, 1, b"\x01" * 32)
    record("publishCheckpoint", trainer.pool.publish_checkpoint(pool_id, 2, b"\x02" * 32))
    # joining pins the first nonce to the latest step (2), each submission pins the next nonce to it
    w1.pool.join_pool(pool_id)
    record("joinPool", w2.pool.join_pool(pool_id))
    digests = [bytes([i]) * 32 for i in range(10, 16)]
    w1.pool.submit_work(pool_id, 2, 0, digests[0], 16)
    record("submitWork", w1.pool.submit_work(pool_id, 2, 1, digests[1], 16))
    w2.pool.submit_work(pool_id, 2, 0, digests[2], 16)
    ids = [w1.pool.work_id_of(pool_id, w1.address, 0), w1.pool.work_id_of(pool_id, w1.address, 1),
           w1.pool.work_id_of(pool_id, w2.address, 0)]
    validator.pool.attest(ids[0])
    record("attest", validator.pool.attest(ids[1]))
    record("challenge", validator.pool.challenge(ids[2], 1, b"\x09" * 32))
    w3.provider.make_request("evm_increaseTime", [params.reward_lock + 1])
    w3.provider.make_request("evm_mine", [])
    w1.pool.claim([ids[0]])
    record("claim", w1.pool.claim([ids[1]]))
    _measure_court(w3, deployment, acc, params, record)
    return out


def _measure_court(w3, deployment, acc, params: PoolParams, record) -> None:
    """The court's calls on a second pool judged by it (validators: accounts 6-9; worker: account 4)."""
    admin, owner = Ledger(w3, deployment, acc[0]), Ledger(w3, deployment, acc[1])
    court = owner.court
    pool = params._replace(validators=[court.address], challenge_window=200, reward_lock=300)
    owner.pool.create_pool(pool)
    pool_id = owner.pool.pool_count()
    owner.token.approve(owner.pool.address, 10**22)
    owner.pool.fund_pool(pool_id, 10**22)
    owner.pool.freeze_validators(pool_id, court.address)
    rules = CourtParams(validator_bond=100 * 10**18, verdict_fee=10**17, dispute_bond=10 * 10**18,
                        non_voter_penalty=5 * 10**18, silence_penalty=10**18, assigned_window=10, verdict_window=30,
                        dispute_window=20, commit_period=20, reveal_period=20, committee_size=3,
                        wrong_verdict_slash=40 * 10**18, activation_delay=10)
    court.configure_pool(pool_id, rules)
    owner.token.approve(court.address, 10**21)
    court.fund_fees(pool_id, 10**21)
    vals = {}
    for i in (6, 7, 8, 9):
        admin.token.mint(acc[i].address, 10**24)
        v = vals[acc[i].address] = Ledger(w3, deployment, acc[i])
        v.token.approve(v.stake.address, 10**24)
        v.stake.bond(500 * 10**18)
        receipt = v.court.register(pool_id)
    record("court.register", receipt)
    w3.provider.make_request("evm_increaseTime", [rules.activation_delay + 1])  # the registrations count from now on
    w3.provider.make_request("evm_mine", [])
    worker = Ledger(w3, deployment, acc[4])
    worker.stake.bond(200 * 10**18)
    worker.pool.allocate(pool_id, 200 * 10**18)
    worker.pool.join_pool(pool_id)
    nonce = worker.pool.get_member(pool_id, worker.address).next_nonce
    worker.pool.submit_work(pool_id, 0, nonce, b"\x21" * 32, 16)
    record("submitWork (court pool)", worker.pool.submit_work(pool_id, 0, nonce + 1, b"\x22" * 32, 16))
    works = [worker.pool.work_id_of(pool_id, worker.address, nonce + k) for k in (0, 1)]
    for _ in range(2):  # the assignment draws from the hash of the block after the submission
        w3.provider.make_request("evm_mine", [])
    judges = [vals[court.assigned_validator(w)] for w in works]
    judges[0].court.attest(works[0])
    record("court.attest", judges[1].court.attest(works[1]))
    disputer = next(v for a, v in vals.items() if a != judges[1].address)
    record("court.dispute", disputer.court.dispute(works[1], b"\x0e" * 32))
    for _ in range(2):
        w3.provider.make_request("evm_mine", [])
    record("court.drawCommittee", disputer.court.draw_committee(works[1]))
    salt = b"\x5a" * 32
    members = [vals[a] for a in court.committee_of(works[1])]
    for m in members:
        receipt = m.court.commit_vote(works[1], vote_commitment(works[1], m.address, True, salt))
    record("court.commitVote", receipt)
    w3.provider.make_request("evm_increaseTime", [rules.commit_period + 1])
    w3.provider.make_request("evm_mine", [])
    for m in members:
        receipt = m.court.reveal_vote(works[1], True, salt)
    record("court.revealVote", receipt)
    w3.provider.make_request("evm_increaseTime", [rules.reveal_period + 1])
    w3.provider.make_request("evm_mine", [])
    record("court.resolve", disputer.court.resolve(works[1]))
    record("court.finalize", judges[0].court.finalize(works[0]))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gas", description=__doc__.splitlines()[0])
    add_record_option(parser)
    args = parser.parse_args()
    figures = measure()
    table = Table(title="proofswarm gas (steady state, anvil)")
    for col in ("function", "execution gas", "total gasUsed", "budget", "ok"):
        table.add_column(col, justify="right" if col != "function" else "left")
    for name, g in figures.items():
        budget = BUDGETS.get(name)
        ok = "" if budget is None else ("yes" if g["execution"] <= budget else "NO")
        table.add_row(name, f"{g['execution']:,}", f"{g['total']:,}", f"{budget:,}" if budget else "-", ok)
    Console().print(table)
    emit({name: g["execution"] for name, g in figures.items()} | {"total": {name: g["total"] for name, g in figures.items()}},
         args, "gas")


if __name__ == "__main__":
    exit_on_signals()
    main()
