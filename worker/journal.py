"""The worker's crash-safe journal of submissions to one pool.

One journal file per pool instance — (chain id, pool contract, the block that created the pool,
pool id), see `journal_name` — so a new pool (or a new devnet reusing the same addresses and ids) never reads a
previous pool's entries. Entries are keyed by the submission nonce, which the chain assigns
(`getMember(...).nextNonce`): the journal never chooses one. Every submission moves through stages,
each recorded (atomically) before the next begins:
    written   — the rollout file for (step, nonce) is on local disk; its digest and work id are known
    uploaded  — the file is on the worker's Kubo node (pinned)
    submitted — `submitWork` with that nonce is mined
After a kill -9 the daemon's `recover()` reads the chain: an entry whose nonce the chain has already
used is marked submitted; one whose nonce is still the chain's next nonce is uploaded and submitted
again with that same nonce (so no nonce is skipped or reused); anything else is dropped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STAGES = ("written", "uploaded", "submitted")


def journal_name(chain_id: int, pool_contract: str, created_in: bytes, pool_id: int) -> str:
    """The journal file name of one pool instance (the hash of the block that created the pool tells two
    devnets with the same addresses and pool ids apart)."""
    return f"journal-{chain_id}-{pool_contract.lower()[2:10]}-pool{pool_id}-{bytes(created_in).hex()[:16]}.json"


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, Any] = {"entries": {}}
        if path.exists():
            self.data = json.loads(path.read_text())

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def record(self, nonce: int, step: int, **fields: Any) -> None:
        """A new entry for the file of submission `nonce` (stage `written`), replacing an abandoned one."""
        self.data["entries"][str(nonce)] = {"nonce": nonce, "step": step, "stage": "written", **fields}
        self._save()

    def advance(self, nonce: int, stage: str, **fields: Any) -> None:
        assert stage in STAGES
        entry = self.data["entries"][str(nonce)]
        entry.update(fields, stage=stage)
        self._save()

    def drop(self, nonce: int) -> None:
        self.data["entries"].pop(str(nonce), None)
        self._save()

    def entries(self, stage: str | None = None) -> list[dict[str, Any]]:
        return sorted((e for e in self.data["entries"].values() if stage is None or e["stage"] == stage),
                      key=lambda e: e["nonce"])

    def submitted_count(self, step: int) -> int:
        return sum(1 for e in self.entries("submitted") if e["step"] == step)
