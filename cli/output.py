"""A command's result: for people (`key  value` lines, amounts in tokens, digests whole) or for scripts
(`--json`, amounts in base units, integers past 2^53 as decimal strings)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
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
    # a court validator's (validator status, withdraw) and a challenge's
    "validator_bond", "locked", "free", "free_bonded", "penalties", "penalties_total", "earned_total", "withdrawn_total",
    "credits", "bond_withdrawn", "fees_withdrawn", "bond_reserved", "slashed", "minted", "balance",
    "chain_bond_withdrawn",
    # a court pool's rules (pool create, pool status)
    "court_validator_bond", "court_verdict_fee", "court_dispute_bond", "court_non_voter_penalty",
    "court_silence_penalty", "court_wrong_verdict_slash", "court_fee_budget",
})
"""Result keys that are amounts of the stake token in base units: in tokens for people, base units in --json."""


def tokens(base_units: int, unit: str = "tokens") -> str:
    """An amount for people, exact to the base unit: 10000000000000000000 → `10 tokens`, 1 → `0.000000000000000001 tokens`
    (`unit`: the token's symbol, where known)."""
    whole, fraction = divmod(abs(base_units), 10**TOKEN_DECIMALS)
    digits = f"{fraction:0{TOKEN_DECIMALS}d}".rstrip("0")
    return f"{'-' if base_units < 0 else ''}{whole}{'.' + digits if digits else ''} {unit}"


def duration(seconds: int) -> str:
    """A span for people: `45 s`, `12 min`, `5 h`, `7 days` (rounded down past two minutes)."""
    seconds = abs(int(seconds))
    for unit, size, least in (("days", 86_400, 2 * 86_400), ("h", 3_600, 2 * 3_600), ("min", 60, 120)):
        if seconds >= least:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def date(unix_s: int, now: int | None = None) -> str:
    """A Unix time for people, in UTC, and how far it is from `now` (the chain's time, where given):
    `2026-12-07 00:21:23 UTC (in 45 s)`, `… (3 min ago)`."""
    try:
        text = datetime.fromtimestamp(unix_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):  # past year 9999 (a chain value no calendar holds): the number
        return f"{unix_s} (Unix time)"
    if now is None:
        return text
    if unix_s == now:
        return f"{text} (now)"
    return f"{text} ({'in ' + duration(unix_s - now) if unix_s > now else duration(now - unix_s) + ' ago'})"


def is_time_key(key: str) -> bool:
    """Result keys that are Unix times (chain time): `…_at`, `…_until`."""
    return key.endswith(("_at", "_until"))


def for_people(key: str, value: Any, now: int | None = None) -> str:
    """One result value for people: an amount in tokens, a time as a date, a table of counts or amounts as
    `name value, …`, a list comma-separated, nothing as `none`."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and key in AMOUNT_KEYS:
        return tokens(value)
    if is_time_key(key) and (value is None or isinstance(value, int)):
        return date(value, now) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{name} {for_people(key, v, now)}" for name, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    return "none" if value is None else str(value)


def print_result(result: dict, as_json: bool, now: int | None = None) -> None:
    """A command's result: JSON for scripts (base units, Unix times), or `key  value` lines for people (amounts in
    tokens, times as dates and, given the chain's time `now`, how far off; digests whole, so that they can be
    copied)."""
    if as_json:
        print_json(result)
        return
    width = max(map(len, result), default=0)
    for key, value in result.items():
        print(f"{key:<{width}}  {for_people(key, value, now)}")
