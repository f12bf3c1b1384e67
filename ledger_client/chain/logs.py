"""Reading event logs in pages: no `eth_getLogs` asks for more than `page_blocks` blocks.

Providers cap a log query's block range (commonly ~10,000 blocks: about 5.6 hours of 2 s blocks) and refuse a longer
one, and a node's cost grows with the range it scans. Every log read of the roles goes through one `LogReader` (the
`Ledger`'s `logs`): it reads the head once, then walks [from, head] in pages of at most `page_blocks` blocks
(`--logs-page-blocks`, default `DEFAULT_PAGE_BLOCKS`). The event cursors (`ledger_client.chain.events`) walk their
pages with the same `pages`.

`scan` remembers, per query, what it found and the highest block it read: asking again reads only the blocks since
(and the last `REORG_BLOCKS` again, so that a shallow reorganisation is followed). A client that ran a day reads a
day's blocks once, in pages; a client restarted after a day reads them again once, in pages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from web3 import Web3
from web3.exceptions import Web3RPCError

from ledger_client.chain.error_bases import LedgerError
from ledger_client.chain.limits import DEFAULT_PAGE_BLOCKS
from ledger_client.chain.tx import with_retries

REORG_BLOCKS = 64
"""How many of the newest blocks a repeated `scan` reads again: a reorganisation that deep is followed."""

PAGE_ATTEMPTS = 4
PAGE_RETRY_S = 0.25
"""A refused page is asked again after 0.25, 0.5, 0.75 s (`logs_page`)."""


def pages(first: int, last: int, page_blocks: int) -> Iterator[tuple[int, int]]:
    """[first, last] cut into consecutive ranges of at most `page_blocks` blocks, oldest first."""
    if page_blocks < 1:
        raise ValueError(f"a log page holds at least one block, not {page_blocks}")
    while first <= last:
        end = min(last, first + page_blocks - 1)
        yield first, end
        first = end + 1


def logs_page(fetch: Callable[[], Iterable], what: str) -> list:
    """One `eth_getLogs` (`fetch`), connection errors retried (`with_retries`). A node may also refuse a range
    ending at a block it has not indexed yet (geth 1.17 just after sealing it: "failed to retrieve log value pointer
    … not found") and answer a moment later: a refusal is asked again after 0.25, 0.5 and 0.75 s, then LedgerError
    naming `what`."""
    for attempt in range(PAGE_ATTEMPTS):
        try:
            return list(with_retries(fetch, what=what))
        except Web3RPCError as exc:
            if attempt == PAGE_ATTEMPTS - 1:
                raise LedgerError(f"{what} refused: {getattr(exc, 'message', None) or exc}") from exc
            time.sleep(PAGE_RETRY_S * (attempt + 1))
    raise AssertionError("unreachable")


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return bytes(value) if isinstance(value, (bytes, bytearray)) else value


class LogReader:
    """A contract event's logs in pages of at most `page_blocks` blocks (thread-safe)."""

    def __init__(self, w3: Web3, page_blocks: int = DEFAULT_PAGE_BLOCKS):
        if page_blocks < 1:
            raise ValueError(f"a log page holds at least one block, not {page_blocks}")
        self.w3 = w3
        self.page_blocks = page_blocks
        self._scans: dict[tuple, tuple[list, int]] = {}
        self._lock = threading.Lock()

    def _page(self, event: Any, filters: dict | None, first: int, last: int) -> list:
        return logs_page(lambda: event.get_logs(argument_filters=filters, from_block=first, to_block=last),
                         f"eth_getLogs of {event.event_name} in blocks {first}..{last}")

    def read(self, event: Any, filters: dict | None = None, from_block: int = 0, to_block: int | None = None) -> list:
        """Every log of `event` (a web3 contract event, e.g. `pool.contract.events.WorkSubmitted`) matching the
        indexed `filters` from `from_block` to `to_block` (None: the head now), oldest first."""
        last = self.w3.eth.block_number if to_block is None else to_block
        out: list = []
        for first, end in pages(max(0, from_block), last, self.page_blocks):
            out.extend(self._page(event, filters, first, end))
        return out

    def first(self, event: Any, filters: dict | None = None, from_block: int = 0) -> Any | None:
        """The oldest matching log (None if there is none), reading pages forward until one holds it."""
        for first, end in pages(max(0, from_block), self.w3.eth.block_number, self.page_blocks):
            if found := self._page(event, filters, first, end):
                return found[0]
        return None

    def newest(self, event: Any, filters: dict | None = None, from_block: int = 0) -> Any | None:
        """The newest matching log (None if there is none), reading pages back from the head until one holds it:
        lookups are nearly always of recent events."""
        for first, end in reversed(list(pages(max(0, from_block), self.w3.eth.block_number, self.page_blocks))):
            if found := self._page(event, filters, first, end):
                return found[-1]
        return None

    def scan(self, event: Any, filters: dict | None = None, from_block: int = 0) -> list:
        """Every matching log from `from_block` to the head, oldest first, as `read` — but remembered: a repeated
        scan reads only the blocks after the highest one read before (and the last `REORG_BLOCKS` again)."""
        key = (event.address, event.event_name, _frozen(filters or {}), from_block)
        head = self.w3.eth.block_number
        with self._lock:
            known, read_to = self._scans.get(key, ([], from_block - 1))
        again = max(from_block, min(read_to + 1, head - REORG_BLOCKS + 1))
        found = [log for log in known if log["blockNumber"] < again] + self.read(event, filters, again, head)
        with self._lock:
            self._scans[key] = (found, head)
        return list(found)

    def highest_read(self, event: Any, filters: dict | None = None, from_block: int = 0) -> int | None:
        """The highest block a `scan` of this query has read (None before the first)."""
        key = (event.address, event.event_name, _frozen(filters or {}), from_block)
        with self._lock:
            return self._scans[key][1] if key in self._scans else None
