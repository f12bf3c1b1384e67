"""`pool create | fund | status | close`: the command line. It parses and checks its arguments (and reads the pool
TOML of `create`) with the standard library and light project modules only, so that `--help` and bad input answer
at once; what the commands do is in deploy/pools.py (web3, pydantic), imported after."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.console import signals_held
from cli.devnet import load_devnet_info, load_trainer_init
from cli.errors import UsageError, one_line_errors
from cli.options import POOL_ID, SECONDS, Parser, amount_option, chain_options, resolve_chain_args
from cli.output import print_result
from deploy.terms import IPFS_CHECK_TIMEOUT_S, PoolHalfCreated, read_pool_toml
from protocol.pool import PoolStatus

def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="pool", description="Create, fund, inspect and close proofswarm compute pools.",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  pool create --config examples/pool-court.toml --json   # checks the config and balances before any transaction
  pool create --config examples/pool-batches.toml        # a permissioned pool whose files settle in batches
  pool fund 1 1000ether
  pool status 1
  pool close 1                                            # the owner gets the unspent budget back""")
    sub = p.add_subparsers(dest="command", required=True)
    common = chain_options()
    c = sub.add_parser("create", parents=[common], help="create a pool from a TOML config (and fund it with its `funding`)")
    c.add_argument("--config", type=Path, required=True, help="pool TOML (examples/pool-court.toml; every key: "
                                                                  "docs/config-reference.md)")
    c.add_argument("--kubo-api", help="Kubo RPC API to read the run spec and base checkpoint from (default: the "
                                      "devnet's); the run spec sets max_samples_per_work and spot_check_bps unless "
                                      "the config does")
    c.add_argument("--ipfs-timeout", type=SECONDS, default=IPFS_CHECK_TIMEOUT_S,
                   help="seconds to wait for the run spec and the base checkpoint's manifest (default %(default)s)")
    f = sub.add_parser("fund", parents=[common], help="add budget to a pool (owner only)")
    f.add_argument("pool_id", type=POOL_ID, help="pool id")
    f.add_argument("amount", help="base units or with a unit: 1000e18, 1000ether, 1000tokens (18 decimals)")
    s = sub.add_parser("status", parents=[common], help="show a pool's parameters and state")
    s.add_argument("pool_id", type=POOL_ID, help="pool id")
    cl = sub.add_parser("close", parents=[common], help="close a pool and refund its unreserved budget (owner only)")
    cl.add_argument("pool_id", type=POOL_ID, help="pool id")
    return p


@one_line_errors(failures=(PoolHalfCreated,))
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    pool_toml = read_pool_toml(args.config) if args.command == "create" else None  # a bad file: refused at once
    with signals_held():  # Ctrl-C while they import: one line (cli.console)
        from deploy.pools import (batch_terms, check_batch_bounds, check_pool_content, check_spot_check_bound,
                                  check_validator_windows, court_terms, create_pool, fund_pool, pool_config,
                                  pool_status)
        from ledger_client.chain.keys import load_account
        from ledger_client.chain.ledger import Ledger
        from ledger_client.chain.queries import pool_state

    devnet = load_devnet_info(args.devnet_dir)
    rpc_url, deployments = resolve_chain_args(args)
    needs_key = args.command != "status"
    account = None
    if needs_key:
        if not (args.key or args.keystore) and devnet is not None and rpc_url == devnet["rpc_url"]:
            args.key = devnet["roles"]["pool_owner"]["private_key"]  # devnet convenience
        account = load_account(args.key, args.keystore, args.password_file)
    if args.command == "create":
        cfg = pool_config(args.config, pool_toml, devnet, load_trainer_init(args.devnet_dir))  # before the chain
        if cfg.court is not None:
            check_validator_windows(cfg.court)
        check_batch_bounds(cfg)
    ledger = Ledger.open(rpc_url, deployments, account, args.chain_id, args.logs_page_blocks)
    if args.command == "create":
        spec = check_pool_content(cfg, args.kubo_api or (devnet or {}).get("kubo_api"), args.ipfs_timeout)
        terms = check_spot_check_bound(cfg, spec)
        pool_id = create_pool(ledger, cfg, spec)
        result = {"pool_id": pool_id, "funded": cfg.funding, **terms, **court_terms(ledger, pool_id),
                  **batch_terms(ledger, pool_id)}
    elif args.command == "fund":
        amount = amount_option(args.amount)
        if amount <= 0:
            raise UsageError("amount must be positive")
        fund_pool(ledger, args.pool_id, amount)
        result = pool_status(ledger, args.pool_id)
    elif args.command == "close":
        if pool_state(ledger, args.pool_id).status == PoolStatus.CLOSED:
            raise UsageError(f"pool {args.pool_id} is already closed")
        before = ledger.token.balance_of(ledger.address)
        ledger.pool.close_pool(args.pool_id)
        result = {"pool_id": args.pool_id, "refunded": ledger.token.balance_of(ledger.address) - before}
    else:
        result = pool_status(ledger, args.pool_id)
    print_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
