"""A command's result: for people (`key  value` lines, amounts in tokens, digests whole) or for scripts
(`--json`, amounts in base units, integers past 2^53 as decimal strings)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

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


def progress_lines(command: str, quiet: bool = False) -> Callable[[str], None]:
    """Progress for people through a slow start: `say("…")` prints `<command>: …` on stderr at once (stdout keeps
    the result, so `--json` output stays parseable); nothing when `quiet` (--quiet, --json)."""

    def say(line: str) -> None:
        if not quiet:
            print(f"{command}: {line}", file=sys.stderr, flush=True)

    return say


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
