"""Errors → exit codes, for every proofswarm command: `UsageError` for bad usage, one table giving each kind of
error its exit code (`EXIT_CODES`), and `one_line_errors`, which prints a known error as one `error: …` line
and returns its code (a bug still raises, with its traceback)."""

from __future__ import annotations

import sys
from functools import wraps
from typing import Any, Callable, TypeVar

from cli.console import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated

EXIT_FAILURE = 1
"""The command could not do its job: the chain, IPFS, a file or a check failed; the message says which."""
EXIT_USAGE = 2
"""Bad command line, configuration or input value; nothing was done."""


class UsageError(Exception):
    """Bad command-line input or configuration (exit code 2)."""


EXIT_CODES: tuple[tuple[str, int], ...] = (
    ("cli.errors.UsageError", EXIT_USAGE),
    ("protocol.errors.InvalidInput", EXIT_USAGE),  # what library code raises for input a person must fix
    ("cli.devnet.DevnetCorrupt", EXIT_USAGE),
    ("protocol.runspec.RunSpecFileError", EXIT_USAGE),
    ("protocol.runspec.TaskUnavailable", EXIT_USAGE),
    ("pydantic_core.ValidationError", EXIT_USAGE),
    ("protocol.digest.InvalidCid", EXIT_USAGE),
    ("protocol.digest.InvalidDigest", EXIT_USAGE),
    ("ledger_client.chain.errors.KeyLoadError", EXIT_USAGE),  # no key, a malformed key, a missing keystore, a wrong password
    ("ledger_client.chain.errors.WrongChain", EXIT_USAGE),  # --chain-id names another chain than the RPC serves
    ("ledger_client.chain.errors.BadRpcUrl", EXIT_USAGE),
    ("ledger_client.chain.contract_errors.UnknownPool", EXIT_USAGE),  # a pool id the chain does not know
    ("ledger_client.chain.error_bases.LedgerError", EXIT_FAILURE),
    ("ledger_client.ipfs.kubo.KuboError", EXIT_FAILURE),
    ("protocol.manifest.CheckpointError", EXIT_FAILURE),
    ("protocol.rollouts.RolloutFileError", EXIT_FAILURE),
    ("builtins.OSError", EXIT_FAILURE),
    ("cli.console.Terminated", EXIT_TERMINATED),  # SIGTERM: raised where Ctrl-C would be (cli.console)
    ("builtins.KeyboardInterrupt", EXIT_INTERRUPTED),
)
"""The one table of exit codes, by the dotted name of each error class: the first row whose class the error is an
instance of decides. Named, not imported: this module must not import web3, pydantic or pyarrow, so that a command
refuses bad usage before its heavy modules load; a class whose module was never imported cannot have raised.
A command adds its own failure classes (e.g. `TrainerStarved`) with `one_line_errors(failures=...)`; they exit 1."""


def _loaded_class(dotted: str) -> type[BaseException] | None:
    """The class `dotted` names if its module is already imported (else nothing can be an instance of it)."""
    module, name = dotted.rsplit(".", 1)
    if module not in sys.modules:
        return None
    return getattr(sys.modules[module], name)


def _is_a(exc: BaseException, dotted: str) -> bool:
    cls = _loaded_class(dotted)
    return cls is not None and isinstance(exc, cls)


def exit_code_of(exc: BaseException, failures: tuple[type[BaseException], ...] = ()) -> int | None:
    """The exit code for `exc` by the table, or None if it is not a known kind (a bug: let it raise)."""
    for dotted, code in EXIT_CODES:
        if _is_a(exc, dotted):
            return code
    return EXIT_FAILURE if isinstance(exc, failures) else None


def describe_error(exc: BaseException) -> str:
    """One line for a CLI: the first field error of a ValidationError, an OSError's reason and file,
    otherwise the first line of the message."""
    if _is_a(exc, "pydantic_core.ValidationError"):
        first = exc.errors()[0]  # type: ignore[attr-defined]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        if first["type"] == "extra_forbidden":
            return f"unknown configuration key {where!r} (a typo?)"
        return f"invalid configuration: {where}: {first['msg']}"
    if isinstance(exc, KeyboardInterrupt):
        return "terminated" if isinstance(exc, Terminated) else "interrupted"
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
