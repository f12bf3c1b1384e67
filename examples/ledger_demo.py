"""The ledger life-cycle on the local devnet, scripted, with real transactions from separate keys:
`python -m deploy.ledger_demo` (seconds; `make demo` runs the whole protocol instead).

The pool owner creates and funds a pool; two workers stake and join; the trainer publishes a
checkpoint digest; each worker uploads a rollout file to Kubo and submits its digest; the
validator attests one submission and challenges the other (evidence on Kubo), which slashes
that worker; the challenge window and reward lock pass (devnet time travel); the honest worker
claims its reward. Prints a summary table and writes runs/demo/summary.json.

Useful to see (and test) the contracts alone; deploy/demo.py runs the real roles.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from eth_account import Account
from rich.console import Console
from rich.table import Table
from web3.logs import DISCARD

from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir
from cli.errors import one_line_errors
from deploy import devnet
from deploy.pools import PoolConfig, create_pool, pool_status
from ledger_client.chain.ledger import Ledger
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import WorkId, cid_to_digest

REASON_SCRIPTED_BAD_WORK = 1


def _events(contract, name: str, receipt) -> list[dict]:
    return [e["args"] for e in getattr(contract.events, name)().process_receipt(receipt, errors=DISCARD)]


def run_demo(state_dir: Path, out_dir: Path, console: Console) -> dict:
    info, started = devnet.up(state_dir)
    console.print(f"devnet {'started' if started else 'already up'}: rpc {info['rpc_url']}, kubo {info['kubo_api_url']}")
    keys = {role: Account.from_key(v["private_key"]) for role, v in info["roles"].items()}
    workers = [Account.from_key(w["private_key"]) for w in info["workers"][:2]]
    deployments = Path(info["deployments"])

    def ledger(account) -> Ledger:
        return Ledger.open(info["rpc_url"], deployments, account, info["chain_id"])

    kubo = KuboClient(info["kubo_api"])
    owner, trainer, validator = ledger(keys["pool_owner"]), ledger(keys["trainer"]), ledger(keys["validator"])

    base_cid = kubo.add_bytes(json.dumps({"demo": "base policy manifest", "step": 0}).encode())
    cfg = PoolConfig(
        trainer=keys["trainer"].address, validators=[keys["validator"].address],
        min_stake=100 * 10**18, reward_per_sample=10**18, slash_amount=50 * 10**18, bounty_bps=2_000,
        challenge_window_s=60, reward_lock_s=120, async_level=2, task="digits/add-v1",
        base_checkpoint=base_cid, max_samples_per_work=64, funding=10_000 * 10**18,
    )
    pool_id = create_pool(owner, cfg)
    console.print(f"pool {pool_id} created and funded with {cfg.funding} base units")

    ckpt_cid = kubo.add_bytes(json.dumps({"demo": "policy manifest", "step": 1}).encode())
    trainer.pool.publish_checkpoint(pool_id, 1, cid_to_digest(ckpt_cid))
    console.print(f"trainer published checkpoint step 1 ({ckpt_cid})")

    worker_ledgers = [ledger(w) for w in workers]
    for wl in worker_ledgers:  # joining pins each worker's next nonce to the latest step, 1 (ComputePool's pin rule)
        wl.ensure_allocation(pool_id, cfg.min_stake)
        wl.pool.join_pool(pool_id)
    console.print("two workers bonded stake, allocated it to the pool and joined")

    n_samples = 16
    work_ids = []
    for i, wl in enumerate(worker_ledgers):
        rollout = json.dumps({"demo_rollout": i, "worker": wl.address, "step": 1, "samples": n_samples}).encode()
        digest = cid_to_digest(kubo.add_bytes(rollout))
        nonce = wl.pool.get_member(pool_id, wl.address).next_nonce
        wl.pool.submit_work(pool_id, 1, nonce, digest, n_samples)
        work_ids.append(bytes(wl.pool.work_id_of(pool_id, wl.address, nonce)))
    console.print(f"both workers submitted {n_samples} samples each")

    validator.pool.attest(work_ids[0])
    evidence = {"work": WorkId(work_ids[1]).text, "reason": "scripted bad work"}
    evidence_cid = kubo.add_bytes(json.dumps(evidence).encode())
    receipt = validator.pool.challenge(work_ids[1], REASON_SCRIPTED_BAD_WORK, cid_to_digest(evidence_cid))
    slashed = [{"worker": e["worker"], "amount": e["amount"]}
               for e in _events(validator.stake.contract, "Slashed", receipt)]
    console.print("validator attested worker A's work and challenged worker B's")

    validator.w3.provider.make_request("evm_increaseTime", [cfg.reward_lock_s + 1])
    validator.w3.provider.make_request("evm_mine", [])
    receipt = worker_ledgers[0].pool.claim([work_ids[0]])
    claimed = [{"worker": e["worker"], "amount": e["amount"]} for e in _events(worker_ledgers[0].pool.contract,
                                                                                "RewardsClaimed", receipt)]
    console.print("the reward lock passed; worker A claimed")

    status = pool_status(owner, pool_id)
    summary = {
        "chain_id": info["chain_id"],
        "pool_id": pool_id,
        "reward_per_sample": cfg.reward_per_sample,
        "slash_amount": cfg.slash_amount,
        "bounty_bps": cfg.bounty_bps,
        "submissions": [{"worker": w.address, "work_id": WorkId(d).text, "n_samples": n_samples}
                        for w, d in zip(workers, work_ids)],
        "slashed": slashed,
        "claimed": claimed,
        "pool_budget": status["budget"],
        "pool_reserved": status["reserved"],
        "worker_stake": {w.address: worker_ledgers[0].stake.bonded_of(w.address)
                         + worker_ledgers[0].pool.get_member(pool_id, w.address).allocation for w in workers},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".summary.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(out_dir / "summary.json")
    kubo.close()
    return summary


def _print_summary(summary: dict, console: Console) -> None:
    table = Table(title=f"proofswarm demo — chain {summary['chain_id']}, pool {summary['pool_id']}")
    table.add_column("event")
    table.add_column("worker", no_wrap=True)
    table.add_column("amount (base units)", justify="right")
    for s in summary["slashed"]:
        table.add_row("slashed", s["worker"], str(s["amount"]))
    for c in summary["claimed"]:
        table.add_row("claimed", c["worker"], str(c["amount"]))
    for w, stake in summary["worker_stake"].items():
        table.add_row("stake now (free + allocated)", w, str(stake))
    table.add_row("pool budget left", "", str(summary["pool_budget"]))
    console.print(table)


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="demo", description=__doc__.splitlines()[0])
    p.add_argument("--state-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    p.add_argument("--out", type=Path, default=Path("runs/demo"))
    p.add_argument("--down-after", action="store_true", help="stop the devnet at the end")
    args = p.parse_args(argv)
    console = Console()
    try:
        summary = run_demo(args.state_dir, args.out, console)
    finally:
        if args.down_after:
            devnet.down(args.state_dir)
    _print_summary(summary, console)
    console.print(f"wrote {args.out / 'summary.json'}" + ("" if args.down_after else "  (stop the devnet with `devnet down`)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
