"""Shared CLI plumbing for every proofswarm command: one exit code per kind of error, one-line errors,
JSON output, chain options with devnet defaults, settings from TOML + command line."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from decimal import Decimal, InvalidOperation, localcontext
from functools import wraps
from pathlib import Path
from typing import Any, Callable, TypeVar

from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    CliSettingsSource,
    PydanticBaseSettingsSource,
    SettingsError,
    TomlConfigSettingsSource,
)

from ledger_client.chain.errors import BadRpcUrl, KeyLoadError, LedgerError, UnknownPool, WrongChain
from ledger_client.ipfs.kubo import KuboError
from protocol.devnet import DEVNET_DIR_HELP, DevnetCorrupt, default_devnet_dir, load_devnet_info
from protocol.digest import InvalidCid, InvalidDigest
from protocol.manifest import CheckpointError
from protocol.rollouts import RolloutFileError
from protocol.runspec import RunSpecFileError, TaskUnavailable

EXIT_FAILURE = 1
"""The command could not do its job: the chain, IPFS, a file or a check failed; the message says which."""
EXIT_USAGE = 2
"""Bad command line, configuration or input value; nothing was done."""
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad command-line input or configuration (exit code 2)."""


EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, EXIT_USAGE),
    (DevnetCorrupt, EXIT_USAGE),
    (RunSpecFileError, EXIT_USAGE),
    (TaskUnavailable, EXIT_USAGE),
    (ValidationError, EXIT_USAGE),
    (InvalidCid, EXIT_USAGE),
    (InvalidDigest, EXIT_USAGE),
    (KeyLoadError, EXIT_USAGE),  # no key, a malformed key, a missing keystore, a wrong password
    (WrongChain, EXIT_USAGE),  # --chain-id names another chain than the RPC serves
    (BadRpcUrl, EXIT_USAGE),
    (UnknownPool, EXIT_USAGE),  # a pool id the chain does not know (ComputePool's UnknownPool, or out of range)
    (LedgerError, EXIT_FAILURE),
    (KuboError, EXIT_FAILURE),
    (CheckpointError, EXIT_FAILURE),
    (RolloutFileError, EXIT_FAILURE),
    (OSError, EXIT_FAILURE),
    (KeyboardInterrupt, EXIT_INTERRUPTED),
)
"""The one table of exit codes: the first row whose class the error is an instance of decides. A command
adds its own failure classes (e.g. `TrainerStarved`) with `one_line_errors(failures=...)`; they exit 1."""


def exit_code_of(exc: BaseException, failures: tuple[type[BaseException], ...] = ()) -> int | None:
    """The exit code for `exc` by the table, or None if it is not a known kind (a bug: let it raise)."""
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return EXIT_FAILURE if isinstance(exc, failures) else None


def describe_error(exc: BaseException) -> str:
    """One line for a CLI: the first field error of a ValidationError, an OSError's reason and file,
    otherwise the first line of the message."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        if first["type"] == "extra_forbidden":
            return f"unknown configuration key {where!r} (a typo?)"
        return f"invalid configuration: {where}: {first['msg']}"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename}" if exc.filename else "")
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(main: F | None = None, *, failures: tuple[type[BaseException], ...] = ()) -> Any:
    """Decorate a CLI entry point: a known error (see EXIT_CODES, plus `failures`) is printed as one
    `error: …` line on stderr and turned into its exit code; anything else is a bug and raises."""

    def decorate(fn: Callable[..., int | None]) -> Callable[..., int]:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> int:
            try:
                return fn(*args, **kwargs) or 0
            except (Exception, KeyboardInterrupt) as exc:
                code = exit_code_of(exc, failures)
                if code is None:
                    raise
                print(f"error: {describe_error(exc)}", file=sys.stderr)
                return code

        return wrapper

    return decorate(main) if main is not None else decorate


def stop_on_signals(stop: threading.Event) -> Callable[[], int]:
    """From now on SIGTERM and SIGINT (Ctrl-C) set `stop`: a daemon finishes what it is doing and returns.
    Before this call Ctrl-C interrupts at once (start-up: nothing a rerun cannot resume). The returned
    function is the exit code: EXIT_INTERRUPTED after Ctrl-C, 0 after SIGTERM or none."""
    interrupted = threading.Event()

    def on_interrupt(*_: Any) -> None:
        interrupted.set()
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, on_interrupt)
    return lambda: EXIT_INTERRUPTED if interrupted.is_set() else 0


UNIT_DECIMALS = {"ether": 18, "eth": 18, "tokens": 18, "token": 18, "gwei": 9, "wei": 0}
"""Amount suffixes, as cast reads them (the stake token has 18 decimals, as ether)."""


def parse_amount(v: object) -> int:
    """Base units from an int or a string: "100e18", "1_000", "1.5ether", "2.5 tokens", "30gwei", "7wei".
    Refuses fractions of a base unit and negative amounts."""
    if isinstance(v, bool):
        raise ValueError("amount must be a number")
    if isinstance(v, int):
        return v
    if not isinstance(v, str):
        raise ValueError("amount must be an integer number of base units")
    text = v.replace("_", "").strip().lower()
    number, decimals = text, 0
    for unit, unit_decimals in UNIT_DECIMALS.items():
        if text.endswith(unit):
            number, decimals = text[: -len(unit)].strip(), unit_decimals
            break
    try:
        mantissa = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"amount {v!r} is not a number (e.g. 100e18, 1.5ether)") from None
    if mantissa.is_finite() and mantissa and mantissa.adjusted() + decimals >= 78:  # "1e9999999": not a huge int
        raise ValueError(f"amount {v!r} does not fit in 256 bits")
    with localcontext() as exact:
        exact.prec = 200  # every amount below 2^256 exactly, no rounding
        value = mantissa.scaleb(decimals)
    if not value.is_finite() or value != value.to_integral_value():
        raise ValueError(f"amount {v!r} is not a whole number of base units")
    if value < 0:
        raise ValueError(f"amount {v!r} is negative")
    return int(value)


class _JsonLogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                "msg": record.getMessage()}
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def add_log_args(p: argparse.ArgumentParser) -> None:
    """--log-level and --log-format for a daemon (its log goes to stderr)."""
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="least severe log lines shown (default %(default)s)")
    p.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="text: time, level, logger, message; json: one object per line (ts, level, logger, msg)")


def configure_logging(args: argparse.Namespace) -> None:
    """The daemon's log on stderr as `add_log_args` asked."""
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonLogFormatter() if args.log_format == "json"
                         else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler], force=True)


def amount_option(text: str, what: str = "amount") -> int:
    """A command-line amount (parse_amount), or a UsageError naming the option."""
    try:
        return parse_amount(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None


JSON_SAFE_INTEGER = 2**53 - 1
"""The largest integer a JSON reader that parses numbers as doubles (jq, JavaScript) keeps exactly."""


def json_safe(obj: Any) -> Any:
    """`obj` with every integer beyond JSON_SAFE_INTEGER as a decimal string (amounts in base units:
    jq reads 999900000000000000000001 as 9.999e+23)."""
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return str(obj) if abs(obj) > JSON_SAFE_INTEGER else obj
    if isinstance(obj, dict):
        return {key: json_safe(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(value) for value in obj]
    return obj


def print_json(obj: Any) -> None:
    """JSON for scripts: integers past 2^53 (amounts in base units) as decimal strings, so no reader rounds them."""
    print(json.dumps(json_safe(obj), indent=2, default=str))


TOKEN_DECIMALS = 18
AMOUNT_KEYS = frozenset({
    "funded", "file_reward", "break_even_slash", "budget", "reserved", "min_stake", "reward_per_sample", "slash_amount",
    "refunded", "bonded", "unbonding", "token_balance", "rewards_owed", "rewards_claimable", "rewards_claimed",
    "allocation", "allocation_required", "claimed", "deallocated", "withdrawn",
})
"""Result keys that are amounts of the stake token in base units: in tokens for people, base units in --json."""


def tokens(base_units: int) -> str:
    """An amount for people, exact to the base unit: 10000000000000000000 → `10 tokens`, 1 → `0.000000000000000001 tokens`."""
    whole, fraction = divmod(abs(base_units), 10**TOKEN_DECIMALS)
    digits = f"{fraction:0{TOKEN_DECIMALS}d}".rstrip("0")
    return f"{'-' if base_units < 0 else ''}{whole}{'.' + digits if digits else ''} tokens"


def print_result(result: dict, as_json: bool) -> None:
    """A command's result: JSON for scripts, or `key  value` lines for people (amounts in tokens, digests whole,
    so that they can be copied)."""
    if as_json:
        print_json(result)
        return
    width = max(map(len, result), default=0)
    for key, value in result.items():
        is_amount = key in AMOUNT_KEYS and isinstance(value, int) and not isinstance(value, bool)
        print(f"{key:<{width}}  {tokens(value) if is_amount else value}")


def use_devnet_role_key(args: argparse.Namespace, role: str, flag: str) -> None:
    """Fill `args.key` with the devnet's key for `role` (unless a key was given)."""
    if args.key or args.keystore:
        return
    devnet = load_devnet_info(args.devnet_dir)
    if devnet is None:
        raise UsageError(f"{flag} needs a running devnet (run `devnet up`)")
    args.key = devnet["roles"][role]["private_key"]


def pop_option(args: list[str], name: str) -> str | None:
    """Remove `name VALUE` from `args` and return VALUE (None if `name` is absent)."""
    if name not in args:
        return None
    at = args.index(name)
    if at + 1 >= len(args):
        raise UsageError(f"{name} needs a value")
    value = args[at + 1]
    del args[at : at + 2]
    return value


def add_chain_args(p: argparse.ArgumentParser) -> None:
    """--rpc-url / --deployments / key options; all default to the local devnet when it is up."""
    p.add_argument("--rpc-url", help="Ethereum JSON-RPC URL (default: the local devnet)")
    p.add_argument("--deployments", type=Path, help="deployments file keyed by chain id (default: the devnet's)")
    p.add_argument("--chain-id", type=int, help="refuse to act unless the RPC serves this chain id")
    p.add_argument("--key", help="hex private key (prefer --keystore or $PROOFSWARM_PRIVATE_KEY)")
    p.add_argument("--keystore", type=Path, help="encrypted JSON keystore file")
    p.add_argument("--password-file", type=Path, help="file holding the keystore password")
    p.add_argument("--devnet-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)


def chain_options(*extra: tuple[str, dict[str, Any]]) -> argparse.ArgumentParser:
    """A parent parser (argparse `parents=[...]`) with the chain options, `--json` and any `extra`
    (flag, add_argument keywords) options, for every sub-command of a CLI at once."""
    parent = argparse.ArgumentParser(add_help=False)
    add_chain_args(parent)
    parent.add_argument("--json", action="store_true", help="print the result as JSON")
    for flag, kwargs in extra:
        parent.add_argument(flag, **kwargs)
    return parent


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


S = TypeVar("S", bound=BaseSettings)


def load_settings(settings_cls: type[S], toml_path: str | Path | None, argv: list[str],
                  fixed: dict[str, Any] | None = None) -> S:
    """Build `settings_cls` from defaults < TOML file < environment < command line < `fixed` (values the
    pool decides, e.g. its sampling spec), validated once."""
    toml = Path(toml_path) if toml_path else None
    if toml is not None and not toml.is_file():
        raise UsageError(f"config file {toml} does not exist")

    class _FromToml(settings_cls):  # type: ignore[valid-type, misc]
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
            if toml is not None:
                sources += (TomlConfigSettingsSource(settings_cls, toml_file=toml),)
            return sources

    try:
        cli = CliSettingsSource(_FromToml, cli_parse_args=argv, cli_prog_name="--set", cli_exit_on_error=False)
    except SettingsError as exc:  # argparse's message, e.g. "unrecognized arguments: --max_step 3"
        reason = str(exc).splitlines()[0].removeprefix("error parsing CLI: ")
        unknown = reason.removeprefix("unrecognized arguments: ")
        raise UsageError(f"unknown configuration option {unknown} (a typo?)" if unknown != reason
                         else f"bad configuration option: {reason}") from None
    loaded = _FromToml(_cli_settings_source=cli, **(fixed or {}))
    return settings_cls.model_validate(loaded.model_dump())
