"""`devnet up | down | status | deploy` — the local devnet, and deploying to any EVM chain."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir
from cli.errors import UsageError, one_line_errors
from cli.output import print_json
from cli.options import COUNT, POSITIVE, address, Parser
from deploy import devnet
from deploy.contracts import MAX_UNBONDING_DELAY_S, MIN_UNBONDING_DELAY_S, deploy_contracts
from ledger_client.chain.keys import load_account
from ledger_client.chain.ledger import connect, save_deployment


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="devnet", description="Local proofswarm devnet (anvil + Kubo + contracts).",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  devnet up                      # anvil + Kubo + contracts in ./.devnet; the other commands find it
  devnet status
  devnet advance 121             # move the devnet's clock past a 120 s reward lock instead of waiting
  devnet deploy --rpc-url https://rpc.example --key $KEY --unbonding-delay 86400
  devnet down""")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_ in (("up", "start anvil and Kubo on free loopback ports and deploy the contracts"),
                        ("down", "stop what `devnet up` started"),
                        ("status", "show whether the devnet's chain, Kubo and contracts answer")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("--state-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
        s.add_argument("--json", action="store_true", help="machine-readable output")
    a = sub.add_parser("advance", help="move the devnet chain's clock forward (a lock or delay passes at once)")
    a.add_argument("seconds", type=COUNT, help="seconds to add to the chain's time")
    a.add_argument("--state-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    a.add_argument("--json", action="store_true", help="machine-readable output")
    d = sub.add_parser("deploy", help="deploy the contracts to any EVM chain from an RPC URL and a key")
    d.add_argument("--rpc-url", required=True, help="Ethereum JSON-RPC URL of the chain to deploy to")
    d.add_argument("--chain-id", type=POSITIVE, help="refuse unless the RPC serves this chain id")
    d.add_argument("--key", help="hex private key (prefer --keystore or $PROOFSWARM_PRIVATE_KEY)")
    d.add_argument("--keystore", type=Path, help="encrypted JSON keystore of the deployer")
    d.add_argument("--password-file", type=Path, help="file holding the keystore password")
    d.add_argument("--token", type=address, help="existing ERC-20 to use as stake token (default: deploy a mintable dev token)")
    d.add_argument("--treasury", help="receives the non-bounty part of slashes (default: the deployer)")
    d.add_argument("--unbonding-delay", type=COUNT, default=7 * 24 * 3600, help="seconds (default 7 days)")
    d.add_argument("--court-min-period", type=POSITIVE, default=36,
                   help="shortest court window or period a pool may set, in seconds: a few of the chain's block "
                        "times (default 36: three 12-second blocks)")
    d.add_argument("--deployments", type=Path, default=Path("deployments.json"), help="file to record addresses in")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    return p


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    if args.command == "up":
        info, started = devnet.up(args.state_dir)
        if args.json:
            print_json({k: v for k, v in info.items() if k not in ("roles", "workers")} | {"started": started})
            return 0
        console.print(("[green]devnet started[/]" if started else "[yellow]devnet already up[/]")
                      + f"  rpc {info['rpc_url']}  kubo {info['kubo_api_url']}")
        table = Table("role", "address")
        for role, acc in info["roles"].items():
            table.add_row(role, acc["address"])
        for n, w in enumerate(info["workers"]):  # numbered as --devnet-worker takes them
            table.add_row(f"worker {n} (--devnet-worker {n})", w["address"])
        console.print(table)
        console.print(f"contracts: {info['contracts']}\ndeployments: {info['deployments']}")
    elif args.command == "down":
        stopped = devnet.down(args.state_dir)
        if args.json:
            print_json({"stopped": stopped})
        else:
            console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    elif args.command == "status":
        st = devnet.status(args.state_dir)
        if args.json:
            print_json(st)
        else:
            for k, v in st.items():
                console.print(f"{k:20} {v}")
        return 0 if st.get("up") and "rpc_error" not in st and "kubo_error" not in st else 1
    elif args.command == "advance":
        if args.seconds <= 0:
            raise UsageError(f"seconds must be positive, got {args.seconds}")
        timestamp = devnet.advance(args.state_dir, args.seconds)
        if args.json:
            print_json({"timestamp": timestamp})
        else:
            console.print(f"devnet clock advanced {args.seconds} s: the latest block's time is {timestamp}")
    elif args.command == "deploy":
        if not MIN_UNBONDING_DELAY_S <= args.unbonding_delay <= MAX_UNBONDING_DELAY_S:
            raise UsageError(f"--unbonding-delay must be within [{MIN_UNBONDING_DELAY_S}, {MAX_UNBONDING_DELAY_S}] "
                             f"seconds (1 hour to 90 days), got {args.unbonding_delay}")
        account = load_account(args.key, args.keystore, args.password_file)
        w3 = connect(args.rpc_url, args.chain_id)
        if not 0 < args.court_min_period < 2**24:
            raise UsageError(f"--court-min-period must be a positive number of seconds below 2^24, got {args.court_min_period}")
        deployment = deploy_contracts(w3, account, args.token, args.treasury, args.unbonding_delay, args.court_min_period)
        save_deployment(args.deployments, deployment)
        if args.json:
            print_json(deployment.model_dump())
        else:
            console.print(f"deployed on chain {deployment.chain_id}: {deployment.model_dump()}\nrecorded in {args.deployments}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
