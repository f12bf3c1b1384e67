"""What every explorer view shares: errors, ids, pages, reason names."""

from __future__ import annotations

import re
from typing import TypeVar

from dashboard.chain_source import Reason
from dashboard.models import Page, SubmissionCounts
from dashboard.store import Row

STATUSES = ("pending", "accepted", "rejected", "paid", "expired")
_WORK_ID = re.compile(r"^0x[0-9a-fA-F]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


class NotFound(LookupError):
    """An unknown pool, worker, work or object (HTTP 404)."""


class BadId(ValueError):
    """A malformed id in the request (HTTP 400)."""


T = TypeVar("T")


def page(item: type[T], items: list[T], total: int, offset: int, limit: int) -> Page[T]:
    return Page[item](items=items, total=total, offset=offset, limit=limit)  # type: ignore[valid-type]


def status_counts(rows: list[Row]) -> SubmissionCounts:
    """Submissions by status from `SELECT status, COUNT(*) AS n … GROUP BY status` (a status without any: 0)."""
    return SubmissionCounts(**({s: 0 for s in STATUSES} | {r["status"]: r["n"] for r in rows}))


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
