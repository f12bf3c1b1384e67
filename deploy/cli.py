"""`devnet up | down | status | advance | deploy | mint` — the local devnet, deploying to any EVM chain, and the dev
stake token's minting (on the devnet or on a chain `devnet deploy` deployed it to)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir, load_devnet_info
from cli.console import signals_held
from cli.errors import UsageError, one_line_errors
from cli.output import date, print_json, print_result, tokens
from cli.options import COUNT, POSITIVE, address, Parser, parse_amount
from deploy.terms import DEPLOY_COURT_MIN_PERIOD_S, MAX_UNBONDING_DELAY_S, MIN_UNBONDING_DELAY_S


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="devnet", description="Local proofswarm devnet (anvil + Kubo + contracts).",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  devnet up                      # anvil + Kubo + contracts in ./.devnet; the other commands find it
  devnet status
  devnet advance 121             # move the devnet's clock past a 120 s reward lock instead of waiting
  devnet mint 0x70997970C51812dc3A010C7d01b50e0d17dc79C8=1000tokens   # dev tokens to an address
  devnet deploy --rpc-url https://rpc.example --key $KEY --unbonding-delay 86400
  devnet mint --rpc-url https://rpc.example --key $KEY --deployments deployments.json 0xYOU=5000tokens
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
    d.add_argument("--court-min-period", type=POSITIVE, default=DEPLOY_COURT_MIN_PERIOD_S,
                   help="shortest court window or period a pool may set, in seconds: a few of the chain's block "
                        "times (default 36: three 12-second blocks)")
    d.add_argument("--deployments", type=Path, default=Path("deployments.json"), help="file to record addresses in")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    m = sub.add_parser("mint", help="give dev stake tokens to addresses: on the devnet, or on a chain `devnet deploy` "
                                    "deployed its dev token to (refuses any other token)")
    m.add_argument("grants", nargs="+", type=grant, metavar="ADDRESS=AMOUNT",
                   help="who gets how much, amounts as cast reads them (1000tokens, 1.5ether, 100e18 base units)")
    m.add_argument("--state-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    m.add_argument("--rpc-url", help="a chain `devnet deploy` deployed to, instead of the devnet (then --key or "
                                     "--keystore of the deployer, who owns the dev token)")
    m.add_argument("--chain-id", type=POSITIVE, help="refuse unless the RPC serves this chain id")
    m.add_argument("--key", help="hex private key of the deployer (prefer --keystore or $PROOFSWARM_PRIVATE_KEY)")
    m.add_argument("--keystore", type=Path, help="encrypted JSON keystore of the deployer")
    m.add_argument("--password-file", type=Path, help="file holding the keystore password")
    m.add_argument("--deployments", type=Path, default=Path("deployments.json"),
                   help="with --rpc-url: the file `devnet deploy` recorded the addresses in (default %(default)s)")
    m.add_argument("--json", action="store_true", help="machine-readable output (amounts in base units)")
    return p


def grant(text: str) -> tuple[str, int]:
    """An argparse type: `ADDRESS=AMOUNT`, a positive amount as cast reads it."""
    who, sep, amount = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not ADDRESS=AMOUNT (e.g. 0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
                                         f"=1000tokens)")
    try:
        base_units = parse_amount(amount)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    if base_units == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the amount must be above zero")
    return address(who.strip()), base_units


def mint(args: argparse.Namespace) -> list[dict]:
    """Mint `args.grants` with the dev token's owner: the devnet's deployer, or the given key with --rpc-url."""
    with signals_held():  # Ctrl-C while they import: one line (cli.console)
        from web3 import Web3

        from ledger_client.chain.keys import load_account
        from ledger_client.chain.ledger import Ledger, connect, load_deployment

    if args.rpc_url is None:
        info = load_devnet_info(args.state_dir.resolve())
        if info is None:
            raise UsageError(f"no devnet is up in {args.state_dir} (run `devnet up`, or pass --rpc-url, a key and "
                             f"--deployments for a chain `devnet deploy` deployed to)")
        rpc_url, chain_id, deployments = info["rpc_url"], info["chain_id"], Path(info["deployments"])
        account = load_account(info["roles"]["deployer"]["private_key"])
    else:
        account = load_account(args.key, args.keystore, args.password_file)
        rpc_url, chain_id, deployments = args.rpc_url, args.chain_id, args.deployments
    w3 = connect(rpc_url, chain_id)
    ledger = Ledger(w3, load_deployment(deployments, w3.eth.chain_id), account)
    if not ledger.deployment.dev_token:
        raise UsageError(f"refusing to mint: the stake token at {ledger.deployment.token} is not the dev token "
                         f"`devnet deploy` deploys (it was deployed with --token)")
    owner = ledger.token.owner()
    if owner.lower() != account.address.lower():
        raise UsageError(f"the dev token's owner is {owner}, not {account.address}: pass the deployer's key")
    minted = []
    for who, amount in args.grants:
        try:
            ledger.token.mint(who, amount)
        except Exception:
            if minted:  # what was given before the failure, so that the command is not run again for them
                print("minted before the failure: " + ", ".join(f"{m['address']}={m['minted']}" for m in minted),
                      file=sys.stderr)
            raise
        minted.append({"address": Web3.to_checksum_address(who), "minted": amount,
                       "balance": ledger.token.balance_of(who)})
    return minted


def check_numbers(args: argparse.Namespace) -> None:
    """The bounds argparse's types do not hold: `advance`'s seconds, `deploy`'s unbonding delay and court period."""
    if args.command == "advance" and args.seconds <= 0:
        raise UsageError(f"seconds must be positive, got {args.seconds}")
    if args.command == "deploy":
        if not MIN_UNBONDING_DELAY_S <= args.unbonding_delay <= MAX_UNBONDING_DELAY_S:
            raise UsageError(f"--unbonding-delay must be within [{MIN_UNBONDING_DELAY_S}, {MAX_UNBONDING_DELAY_S}] "
                             f"seconds (1 hour to 90 days), got {args.unbonding_delay}")
        if not 0 < args.court_min_period < 2**24:
            raise UsageError(f"--court-min-period must be a positive number of seconds below 2^24, got {args.court_min_period}")


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    check_numbers(args)  # before web3, rich and the devnet's modules load: bad input answers at once
    with signals_held():
        from rich.console import Console
        from rich.table import Table

        from deploy import devnet

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
        print_result({**info["contracts"], "deployments": info["deployments"]}, as_json=False)
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
        timestamp = devnet.advance(args.state_dir, args.seconds)
        if args.json:
            print_json({"timestamp": timestamp})
        else:
            print(f"devnet clock advanced {args.seconds} s: the latest block's time is {date(timestamp)}")
    elif args.command == "mint":
        minted = mint(args)
        if args.json:
            print_json(minted)
        for row in [] if args.json else minted:
            print(f"minted {tokens(row['minted'])} to {row['address']}: it holds {tokens(row['balance'])}")
    elif args.command == "deploy":
        with signals_held():
            from deploy.contracts import deploy_contracts
            from ledger_client.chain.keys import load_account
            from ledger_client.chain.ledger import connect, save_deployment

        account = load_account(args.key, args.keystore, args.password_file)
        w3 = connect(args.rpc_url, args.chain_id)
        deployment = deploy_contracts(w3, account, args.token, args.treasury, args.unbonding_delay, args.court_min_period)
        save_deployment(args.deployments, deployment)
        if args.json:
            print_json(deployment.model_dump())
        else:
            print_result({**deployment.model_dump(), "recorded_in": str(args.deployments)}, as_json=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
