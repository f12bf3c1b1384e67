"""`worker start | status | claim | deallocate | unstake | withdraw` — the contributor's command."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cli.console import signals_held
from cli.errors import UsageError, one_line_errors
from cli.options import (
    POOL_ID,
    PORT,
    POSITIVE,
    SECONDS,
    add_config_arg,
    add_log_args,
    amount_option,
    chain_options,
    http_url,
    parse_with_config,
    whole,
    Parser,
)
from cli.output import print_result, tokens
from worker.options import DEFAULT_MAX_PENDING, DEFAULT_RUN_LEAVES, compute_of

EXPLORER_ENV = "PROOFSWARM_EXPLORER_URL"


def _add_start_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pool", type=POOL_ID, required=True, help="pool id")
    p.add_argument("--kubo-api", help="Kubo RPC API multiaddr or URL (default: the devnet's)")
    p.add_argument("--work-dir", type=Path, help="journal, checkpoints and rollout files (default .worker/<address>)")
    p.add_argument("--submissions-per-step", type=POSITIVE, default=1000,
                   help="at most this many files per policy step (default: no practical limit)")
    p.add_argument("--run-leaves", type=POSITIVE, default=DEFAULT_RUN_LEAVES,
                   help=f"in a pool that settles in batches: files signed and posted as one run (default "
                        f"{DEFAULT_RUN_LEAVES}; fewer when the worker has no more to make now)")
    p.add_argument("--max-pending", type=POSITIVE, default=DEFAULT_MAX_PENDING,
                   help=f"wait while this many submissions await a verdict (default {DEFAULT_MAX_PENDING}): a worker makes "
                        "at most this many files per verdict latency, and a broken one loses at most this many slashes "
                        "before it sees the first")
    p.add_argument("--max-submissions", type=POSITIVE, help="stop after this many submissions")
    p.add_argument("--no-pace", action="store_true",
                   help="generate as fast as possible instead of pacing on the trainer's demand note (worker/pacing.py): "
                        "files the trainer drops as too stale are then made and checked for nothing")
    p.add_argument("--poll-interval", type=SECONDS, default=0.5, help="seconds between looks at the chain (default 0.5)")
    p.add_argument("--quiet", action="store_true", help="no live status screen (logs only)")
    p.add_argument("--max-restakes", type=whole(-1), default=3, metavar="N",
                   help="top the allocation up again after at most N slashes; the next slash stops the worker with "
                        "its reason (default 3; -1: no cap)")
    p.add_argument("--explorer", default=os.environ.get(EXPLORER_ENV), metavar="URL", type=http_url,
                   help=f"the pool explorer's URL: each challenge on the live screen links to its page there "
                        f"(default ${EXPLORER_ENV})")
    p.add_argument("--metrics-port", type=PORT, help="serve Prometheus /metrics on 127.0.0.1:PORT")
    add_log_args(p)
    p.add_argument("--device", help="where generation runs: cpu (default), cuda or cuda:N (torch backend); "
                                    "vLLM picks its own GPU (cuda or leave it out)")
    p.add_argument("--dtype", help="compute dtype: float32 (default) or bfloat16 — the pool's run spec must be "
                                   "calibrated for it (docs/gpu-guide.md)")
    p.add_argument("--backend", default="torch", metavar="{torch,vllm}",
                   help="inference engine (default torch; vllm needs pip install '.[vllm]' and a GPU)")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="worker", description="Contribute compute to a proofswarm pool.",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  worker start --pool 1 --devnet-worker 0            # stake, join, generate, submit until Ctrl-C
  worker start --pool 1 --keystore key.json --password-file pw --device cuda --dtype bfloat16
  worker status --pool 1
  worker claim --pool 1
  worker unstake 50ether --leave 1 && worker withdraw
  worker deallocate --pool 1 --chain-bond            # the forced-error chain's bond, once it is settled
  worker deallocate --pool 1 --batch-bond            # the WorkBatches bond: exit now, unlock after the last window""")
    sub = p.add_subparsers(dest="command", required=True)
    common = chain_options(("--devnet-worker", {"type": int, "help": "use the devnet's dev worker key number N"}))
    start = sub.add_parser("start", parents=[common], help="stake, join and generate verified rollouts until stopped")
    _add_start_args(start)
    add_config_arg(start)
    st = sub.add_parser("status", parents=[common], help="stake, submissions by verdict, rewards, challenges with "
                                                         "their reasons, current step")
    st.add_argument("--pool", type=POOL_ID, help="restrict to one pool")
    st.add_argument("--explorer", default=os.environ.get(EXPLORER_ENV), metavar="URL", type=http_url,
                    help=f"the pool explorer's URL: each challenge links to its page there (default ${EXPLORER_ENV})")
    cl = sub.add_parser("claim", parents=[common], help="claim every unlocked accepted reward")
    cl.add_argument("--pool", type=POOL_ID, help="only this pool's rewards (default: every pool's)")
    un = sub.add_parser("unstake", parents=[common], help="start unbonding stake (withdrawable after the unbonding delay)")
    un.add_argument("amount", nargs="?", help="base units or with a unit, e.g. 50e18 or 50ether (default: all free bonded stake)")
    un.add_argument("--leave", type=POOL_ID, metavar="POOL",
                    help="first leave this pool and deallocate what its open work does not require")
    de = sub.add_parser("deallocate", parents=[common],
                        help="return a pool allocation to free bonded stake (all its open work does not require)")
    de.add_argument("--pool", type=POOL_ID, required=True, help="pool id")
    de.add_argument("--chain-bond", action="store_true",
                    help="instead: return the bond locked in ForcedErrors with this worker's hash chain (once the "
                         "chain's last epoch is settled; stop the daemon first)")
    de.add_argument("--batch-bond", action="store_true",
                    help="instead: stop the WorkBatches bond counting after this epoch and, once that epoch's batches "
                         "are past their windows, return it (run again then; stop the daemon first)")
    sub.add_parser("withdraw", parents=[common], help="withdraw unbonded stake whose delay has passed")
    return p


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    args = parse_with_config(_parser(), argv)  # before web3 and torch load: bad input answers at once
    if args.command == "start":
        compute_of(args)
    with signals_held():  # Ctrl-C while they import: one line (cli.console)
        from ledger_client.chain.queries import chain_time, pool_state
        from worker.account import claim_all, deallocate_free, open_ledger, status

    ledger = open_ledger(args)
    if args.command == "start":
        pool_state(ledger, args.pool)  # an unknown pool: one error line before torch and the model load
        with signals_held():
            from worker.daemon import run_from_args  # pulls in torch: only for `start`

        return run_from_args(args, ledger)
    for pool_id in (getattr(args, "pool", None), getattr(args, "leave", None)):
        if pool_id is not None:
            pool_state(ledger, pool_id)  # an unknown pool is one error line (UnknownPool), not an empty result
    if args.command == "status":
        result = status(ledger, args.pool, args.explorer)
    elif args.command == "claim":
        result = {"claimed": claim_all(ledger, args.pool)}
    elif args.command == "unstake":
        asked = amount_option(args.amount) if args.amount else None  # before any transaction
        if args.leave is not None:
            if ledger.pool.is_member(args.leave, ledger.address):
                ledger.pool.leave_pool(args.leave)
            deallocate_free(ledger, args.leave)
        bonded = ledger.stake.bonded_of(ledger.address)  # free bonded only: allocated stake is locked
        amount = bonded if asked is None else asked
        if amount <= 0 or amount > bonded:
            raise UsageError(f"cannot unstake {tokens(amount)}: free bonded stake is {tokens(bonded)} (allocated stake must be "
                             f"deallocated first: `worker deallocate --pool N`)")
        ledger.stake.unbond(amount)
        unbonding, ready_at = ledger.stake.unbonding_of(ledger.address)
        result = {"unbonding": unbonding, "withdrawable_at": ready_at}
    elif args.command == "deallocate" and args.chain_bond and args.batch_bond:
        raise UsageError("--chain-bond and --batch-bond are two commands: give one")
    elif args.command == "deallocate" and args.batch_bond:
        from worker.batched import release_batch_bond

        result = release_batch_bond(ledger, args.pool)
    elif args.command == "deallocate" and args.chain_bond:
        from cli.chain_bond import withdraw_chain_bond
        from protocol.hashchain import Role

        result = withdraw_chain_bond(ledger, args.pool, Role.WORKER)
    elif args.command == "deallocate":
        result = {"pool_id": args.pool, "deallocated": deallocate_free(ledger, args.pool),
                  "allocation": ledger.pool.get_member(args.pool, ledger.address).allocation}
    else:
        before = ledger.token.balance_of(ledger.address)
        ledger.stake.withdraw()
        result = {"withdrawn": ledger.token.balance_of(ledger.address) - before}
    challenges = result.pop("challenges", None) if args.command == "status" and not args.json else None
    print_result(result, args.json, now=None if args.json else chain_time(ledger))
    for c in challenges or []:  # one line each: what it was, what it cost, where to read why
        print(f"challenged {c['reason']}: work {c['work_id']} (pool {c['pool_id']}), slashed {tokens(c['slashed'])}"
              f"{', evidence ' + c['evidence'] if c['evidence'] else ''}{', why: ' + c['explain'] if c['explain'] else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
