"""What every explorer view shares: errors, ids, pages, reason names."""

from __future__ import annotations

import re
from typing import Any

from dashboard.chain_source import Reason

STATUSES = ("pending", "accepted", "rejected", "paid", "expired")
_WORK_ID = re.compile(r"^0x[0-9a-fA-F]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


class NotFound(LookupError):
    """An unknown pool, worker, work or object (HTTP 404)."""


class BadId(ValueError):
    """A malformed id in the request (HTTP 400)."""


def page(items: list, total: int, offset: int, limit: int) -> dict[str, Any]:
    return {"items": items, "total": total, "offset": offset, "limit": limit}


def reason_name(code: int) -> str:
    try:
        return Reason(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def work_id_of(text: str) -> str:
    if not _WORK_ID.match(text):
        raise BadId(f"{text!r} is not a work id (0x and 64 hex digits)")
    return text.lower()


def address_of(text: str) -> str:
    if not _ADDRESS.match(text):
        raise BadId(f"{text!r} is not an address (0x and 40 hex digits)")
    return text.lower()
