"""The worker's crash-safe journal of submissions to one pool.

One journal file per pool instance — (chain id, pool contract, the block that created the pool,
pool id), see `journal_name` — so a new pool (or a new devnet reusing the same addresses and ids) never reads a
previous pool's entries. Entries are keyed by the submission nonce, which the chain assigns
(`getMember(...).nextNonce`): the journal never chooses one. Every submission moves through stages,
each recorded before the next begins:
    written   — the rollout file for (step, nonce) is on local disk; its digest and work id are known
    uploaded  — the file is on the worker's Kubo node (pinned)
    submitted — `submitWork` with that nonce is mined
After a kill -9 the daemon's `recover()` reads the chain: an entry whose nonce the chain has already
used is marked submitted; one whose nonce is still the chain's next nonce is uploaded and submitted
again with that same nonce (so no nonce is skipped or reused); anything else is dropped.

On disk the journal is a log: one JSON line per change (an entry as it now is, or `{"drop": nonce}`), appended
before the call returns, so a change costs one short write however long the journal is (it was
rewritten whole on every change, which made a worker's time per file grow with its history). Reading replays the
lines, the last one per nonce winning; a line cut short by a kill -9 can only be the last and is ignored (its
change had not returned). Opening compacts the log to one line per entry (written aside, then renamed over it).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from protocol.errors import InvalidInput

STAGES = ("written", "uploaded", "submitted")


class JournalCorrupt(InvalidInput):
    """A journal line is not a journal line (the file was edited or damaged): the worker refuses to guess (exit 2)."""


def journal_name(chain_id: int, pool_contract: str, created_in: bytes, pool_id: int) -> str:
    """The journal file name of one pool instance (the hash of the block that created the pool tells two
    devnets with the same addresses and pool ids apart)."""
    return f"journal-{chain_id}-{pool_contract.lower()[2:10]}-pool{pool_id}-{bytes(created_in).hex()[:16]}.json"


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self._entries: dict[int, dict[str, Any]] = {}
        self._open: set[int] = set()
        """Nonces of submitted entries without a final status (what the daemon polls the chain for)."""
        self._per_step: Counter[int] = Counter()
        """Submitted entries per step."""
        if path.exists():
            for entry in _replay(path):
                self._index(entry)
        self._compact()

    def _compact(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text("".join(json.dumps(e) + "\n" for e in self.entries()))
        os.replace(tmp, self.path)

    def _index(self, entry: dict[str, Any] | None, nonce: int | None = None) -> None:
        """Make `entry` the journal's entry of its nonce (None: drop `nonce`'s)."""
        nonce = entry["nonce"] if entry is not None else nonce
        old = self._entries.pop(nonce, None)
        if old is not None and old["stage"] == "submitted":
            self._per_step[old["step"]] -= 1
        self._open.discard(nonce)
        if entry is None:
            return
        self._entries[nonce] = entry
        if entry["stage"] == "submitted":
            self._per_step[entry["step"]] += 1
            if not entry.get("final"):
                self._open.add(nonce)

    def _append(self, line: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")

    def record(self, nonce: int, step: int, **fields: Any) -> None:
        """A new entry for the file of submission `nonce` (stage `written`), replacing an abandoned one."""
        entry = {"nonce": nonce, "step": step, "stage": "written", **fields}
        self._append(entry)
        self._index(entry)

    def advance(self, nonce: int, stage: str, **fields: Any) -> None:
        assert stage in STAGES
        entry = {**self._entries[nonce], **fields, "stage": stage}
        self._append(entry)
        self._index(entry)

    def drop(self, nonce: int) -> None:
        if nonce in self._entries:
            self._append({"drop": nonce})
            self._index(None, nonce)

    def entries(self, stage: str | None = None) -> list[dict[str, Any]]:
        return sorted((e for e in self._entries.values() if stage is None or e["stage"] == stage),
                      key=lambda e: e["nonce"])

    def open_submissions(self) -> list[dict[str, Any]]:
        """The submitted entries with no final status yet, by nonce."""
        return [self._entries[n] for n in sorted(self._open)]

    def submitted_count(self, step: int) -> int:
        return self._per_step[step]


def _replay(path: Path) -> list[dict[str, Any]]:
    """The entries a journal file holds, in the order their nonces were last changed (the file of an older
    worker, one JSON object `{"entries": {nonce: entry}}`, is read too)."""
    text = path.read_text()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "entries" in whole:
        return list(whole["entries"].values())
    entries: dict[int, dict[str, Any]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        try:
            change = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1 and not text.endswith("\n"):
                break  # a kill -9 cut the last append short: that change never returned
            raise JournalCorrupt(f"{path}: line {i + 1} is not a journal line ({line[:40]!r}); the file was edited or "
                             "damaged — move it aside: the worker then takes its next nonce from the chain") from None
        if "drop" in change:
            entries.pop(change["drop"], None)
        else:
            entries.pop(change["nonce"], None)
            entries[change["nonce"]] = change
    return list(entries.values())
