"""Printing a benchmark's figures: an aligned two-column table, then the JSON line scripts read."""

from __future__ import annotations

import json


def print_rows(rows: list[tuple[str, str]], result: dict) -> None:
    """Print `rows` as `name  value`, names padded to the longest, then `result` as one JSON line."""
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>10}")
    print(json.dumps(result))
