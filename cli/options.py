"""Command-line options every proofswarm command shares: the parser (its usage errors one `error:` line, exit 2),
value types checked before any effect (counts, seconds, ports, URLs, addresses), chain options with devnet
defaults, log options, amounts as cast reads them, settings from TOML + command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tomllib
from decimal import Decimal, InvalidOperation, localcontext
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir, load_devnet_info
from cli.errors import UsageError
from ledger_client.chain.limits import DEFAULT_PAGE_BLOCKS

if TYPE_CHECKING:  # pydantic-settings loads in `load_settings`: a command's parser and checks come first
    from pydantic_settings import BaseSettings

UNIT_DECIMALS = {"ether": 18, "eth": 18, "tokens": 18, "token": 18, "gwei": 9, "wei": 0}
"""Amount suffixes, as cast reads them (the stake token has 18 decimals, as ether)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one `error:` line naming the command and exit 2 (a UsageError the
    entry point's `one_line_errors` prints), not argparse's usage block. Its subcommands are Parsers too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def whole(least: int = 0, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number in [least, most]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least or (most is not None and value > most):
            bound = f"≥ {least}" if most is None else f"from {least} to {most}"
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: a whole number {bound}")
        return value

    parse.__name__ = "whole number"
    parse.least, parse.most = least, most  # type: ignore[attr-defined]  (for the tests' bad-input sample)
    return parse


def real(least: float = 0.0, *, above: bool = False, most: float | None = None) -> Callable[[str], float]:
    """An argparse type: a finite number ≥ least (> least with `above`) and ≤ most."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        low = value > least if above else value >= least
        if not (low and value == value and abs(value) != float("inf") and (most is None or value <= most)):
            bound = (f"> {least}" if above else f"≥ {least}") + ("" if most is None else f" and ≤ {most}")
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: a number {bound}")
        return value

    parse.__name__ = "number"
    parse.least, parse.above, parse.most = least, above, most  # type: ignore[attr-defined]  (as whole's)
    return parse


COUNT = whole(0)
"""How many of something, 0 allowed."""
POSITIVE = whole(1)
"""How many of something, at least one."""
SECONDS = real(0.0, above=True)
"""A duration in seconds, above zero."""
PORT = whole(1, 65535)
"""A TCP port."""
POOL_ID = whole(1)
"""A pool id (pools are numbered from 1)."""


def http_url(text: str) -> str:
    """An argparse type: an http(s) URL with a host."""
    url = urlparse(text)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:8900)")
    return text


def address(text: str) -> str:
    """An argparse type: a 20-byte hex address, 0x-prefixed."""
    body = text[2:] if text.startswith(("0x", "0X")) else None
    if body is None or len(body) != 40 or any(c not in "0123456789abcdefABCDEF" for c in body):
        raise argparse.ArgumentTypeError(f"{text!r} is not an address (0x and 40 hex digits)")
    return text


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


def require_file(path: Path, what: str) -> None:
    """A UsageError `<what> <path> does not exist` unless `path` is a file: checked before a command loads its
    heavy modules."""
    if not Path(path).is_file():
        raise UsageError(f"{what} {path} does not exist")


def add_config_arg(p: argparse.ArgumentParser) -> None:
    """`--config FILE`: a TOML file of this command's options (`pool = 1`, `fetch-timeout = 20`, …); flags on the
    command line win over it (`parse_with_config`)."""
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="TOML file of this command's options, named as the flags without dashes (e.g. pool = 1, "
                        "kubo-api = \"/ip4/127.0.0.1/tcp/5001\"); flags given on the command line win")


def parse_with_config(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`, with the options of a subcommand's `--config` file as its defaults. A key that is
    no option of the command, a value of the wrong kind, or a file that is missing or no TOML is a UsageError."""
    argv = sys.argv[1:] if argv is None else list(argv)
    path = next((v.split("=", 1)[1] if "=" in v else (argv[i + 1] if i + 1 < len(argv) else None)
                 for i, v in enumerate(argv) if v == "--config" or v.startswith("--config=")), None)
    commands = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
    name = next((v for v in argv if v in commands), None)
    if path is not None and name is not None and any(a.dest == "config" for a in commands[name]._actions):
        _config_defaults(commands[name], Path(path))
    return parser.parse_args(argv)


def _config_defaults(command: argparse.ArgumentParser, path: Path) -> None:
    try:
        values = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"config file {path} is no TOML file: {exc}") from None
    options = {a.dest: a for a in command._actions if a.option_strings and a.dest not in ("help", "config")}
    defaults = {}
    for key, value in values.items():
        action = options.get(key.replace("-", "_"))
        if action is None:
            raise UsageError(f"config file {path}: {key!r} is no option of `{command.prog}` (its options: "
                             f"{', '.join(sorted(k.replace('_', '-') for k in options))})")
        takes_flag = action.nargs == 0  # store_true and the like: a boolean
        if isinstance(value, (dict, list)) or isinstance(value, bool) != takes_flag:
            raise UsageError(f"config file {path}: {key} = {value!r} is not a {'boolean' if takes_flag else 'value'} "
                             f"for {action.option_strings[0]}")
        defaults[action.dest] = value if takes_flag else str(value)  # argparse converts string defaults by `type`
        action.required = False
    command.set_defaults(**defaults)


def add_chain_args(p: argparse.ArgumentParser) -> None:
    """--rpc-url / --deployments / key options; all default to the local devnet when it is up; --logs-page-blocks
    (pass it to `Ledger.open`)."""
    p.add_argument("--rpc-url", help="Ethereum JSON-RPC URL (default: the local devnet)")
    p.add_argument("--deployments", type=Path, help="deployments file keyed by chain id (default: the devnet's)")
    p.add_argument("--chain-id", type=POSITIVE, help="refuse to act unless the RPC serves this chain id")
    p.add_argument("--key", help="hex private key (prefer --keystore or $PROOFSWARM_PRIVATE_KEY)")
    p.add_argument("--keystore", type=Path, help="encrypted JSON keystore file")
    p.add_argument("--password-file", type=Path, help="file holding the keystore password")
    p.add_argument("--devnet-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    p.add_argument("--logs-page-blocks", type=POSITIVE, default=DEFAULT_PAGE_BLOCKS, metavar="BLOCKS",
                   help="the most blocks one eth_getLogs asks for: longer histories are read in pages (providers "
                        "commonly refuse more than 10,000; default %(default)s)")


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


S = TypeVar("S", bound="BaseSettings")


def load_settings(settings_cls: type[S], toml_path: str | Path | None, argv: list[str],
                  fixed: dict[str, Any] | None = None) -> S:
    """Build `settings_cls` from defaults < TOML file < environment < command line < `fixed` (values the
    pool decides, e.g. its sampling spec), validated once."""
    from pydantic_settings import CliSettingsSource, PydanticBaseSettingsSource, SettingsError, TomlConfigSettingsSource

    toml = Path(toml_path) if toml_path else None
    if toml is not None:
        require_file(toml, "config file")

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
