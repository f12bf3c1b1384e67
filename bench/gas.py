"""Gas used by the hot contract calls, on a fresh anvil: `python -m bench.gas`.

Each call is measured in the steady state a running pool is in ("warm storage": the pool,
the worker's registry entry and token balances already exist), i.e. the second occurrence of
the call. `execution` is the receipt's gasUsed minus the intrinsic cost (21000 + calldata),
which is what the budgets below refer to; `total` is the receipt's gasUsed.

Budgets (issue #2): submitWork ≤ 60,000, attest ≤ 40,000, claim ≤ 60,000.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from deploy.anvil import dev_accounts, start_anvil
from ledger_client.chain.ledger import Ledger, connect

from ledger_client.chain.bindings import PoolParams

from deploy.contracts import deploy_contracts

BUDGETS = {"submitWork": 60_000, "attest": 40_000, "claim": 60_000}


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
    w1.pool.join_pool(pool_id)
    record("joinPool", w2.pool.join_pool(pool_id))
    trainer.pool.publish_checkpoint(pool_id, 1, b"\x01" * 32)
    record("publishCheckpoint", trainer.pool.publish_checkpoint(pool_id, 2, b"\x02" * 32))
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
    return out


def main() -> None:
    figures = measure()
    table = Table(title="proofswarm gas (steady state, anvil)")
    for col in ("function", "execution gas", "total gasUsed", "budget", "ok"):
        table.add_column(col, justify="right" if col != "function" else "left")
    for name, g in figures.items():
        budget = BUDGETS.get(name)
        ok = "" if budget is None else ("yes" if g["execution"] <= budget else "NO")
        table.add_row(name, f"{g['execution']:,}", f"{g['total']:,}", f"{budget:,}" if budget else "-", ok)
    Console().print(table)
    print(json.dumps({name: g["execution"] for name, g in figures.items()}
                     | {"total": {name: g["total"] for name, g in figures.items()}}))


if __name__ == "__main__":
    main()
