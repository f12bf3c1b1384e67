"""Shared CLI plumbing for every proofswarm command: one-line errors, JSON output, devnet defaults."""

from __future__ import annotations

import argparse
import json
import sys
from functools import wraps
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from ledger_client.checkpoint_manifest import CheckpointError
from ledger_client.cid import InvalidCid, InvalidDigest
from ledger_client.errors import LedgerError
from ledger_client.kubo import KuboError
from ledger_client.kubo_node import KuboBinaryNotFound, KuboStartError

DEFAULT_DEVNET_DIR = Path(".devnet")
EXIT_ERROR = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line input or configuration (exit code 2)."""


def one_line_errors(main: Callable[..., int | None]) -> Callable[..., int]:
    """Run a CLI entry point; print known errors as one `error: …` line and exit non-zero."""

    @wraps(main)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        try:
            return main(*args, **kwargs) or 0
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "config"
            print(f"error: invalid configuration: {where}: {first['msg']}", file=sys.stderr)
            return EXIT_USAGE
        except (LedgerError, KuboError, KuboBinaryNotFound, KuboStartError, CheckpointError, InvalidCid,
                InvalidDigest) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
        except OSError as exc:
            print(f"error: {exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}", file=sys.stderr)
            return EXIT_ERROR

    return wrapper


def parse_amount(v: object) -> int:
    """Base units: an int, or a string like "100e18" / "1_000"."""
    if isinstance(v, bool):
        raise ValueError("amount must be a number")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.replace("_", "").strip()
        if "e" in s:
            mant, exp = s.split("e", 1)
            if "." in mant:
                whole, frac = mant.split(".", 1)
                return int(whole + frac) * 10 ** (int(exp) - len(frac))
            return int(mant) * 10 ** int(exp)
        return int(s)
    raise ValueError("amount must be an integer number of base units")


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def print_result(result: dict, as_json: bool) -> None:
    """A command's result: JSON for scripts, or a two-column table for people."""
    if as_json:
        print_json(result)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_header=False)
    for key, value in result.items():
        table.add_row(key, str(value))
    Console().print(table)


def use_devnet_role_key(args: argparse.Namespace, role: str, flag: str) -> None:
    """Fill `args.key` with the devnet's key for `role` (unless a key was given)."""
    if args.key or args.keystore:
        return
    devnet = load_devnet_info(args.devnet_dir)
    if devnet is None:
        raise UsageError(f"{flag} needs a running devnet (run `devnet up`)")
    args.key = devnet["roles"][role]["private_key"]


def load_devnet_info(state_dir: Path | None = None) -> dict | None:
    """The devnet.json written by `devnet up`, if there is one."""
    path = (state_dir or DEFAULT_DEVNET_DIR) / "devnet.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise UsageError(f"{path} is corrupt; run `devnet down` then `devnet up`") from None


def add_chain_args(p: argparse.ArgumentParser) -> None:
    """--rpc-url / --deployments / key options; all default to the local devnet when it is up."""
    p.add_argument("--rpc-url", help="Ethereum JSON-RPC URL (default: the local devnet)")
    p.add_argument("--deployments", type=Path, help="deployments file keyed by chain id (default: the devnet's)")
    p.add_argument("--chain-id", type=int, help="refuse to act unless the RPC serves this chain id")
    p.add_argument("--key", help="hex private key (prefer --keystore or $PROOFSWARM_PRIVATE_KEY)")
    p.add_argument("--keystore", type=Path, help="encrypted JSON keystore file")
    p.add_argument("--password-file", type=Path, help="file holding the keystore password")
    p.add_argument("--devnet-dir", type=Path, default=DEFAULT_DEVNET_DIR, help="devnet state folder (default .devnet)")


def resolve_chain_args(args: argparse.Namespace) -> tuple[str, Path]:
    """RPC URL and deployments file from the arguments or, failing that, the running devnet."""
    devnet = load_devnet_info(args.devnet_dir)
    rpc_url = args.rpc_url or (devnet or {}).get("rpc_url")
    deployments = args.deployments or (Path((devnet or {})["deployments"]) if devnet else None)
    if not rpc_url:
        raise UsageError("no --rpc-url given and no devnet is up (run `devnet up`)")
    if deployments is None:
        raise UsageError("no --deployments given and no devnet is up (run `devnet up`)")
    return rpc_url, deployments
