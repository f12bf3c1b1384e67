"""The worker's crash-safe journal of submissions.

Every submission moves through stages, each recorded (atomically) before the next begins:
    reserved  — a prompt-assignment nonce is taken (never reused, even after a crash)
    written   — the rollout file is on local disk; its digest is known
    uploaded  — the file is on the worker's Kubo node (pinned)
    submitted — `submitWork` is mined
After a kill -9, `recover()` finishes what can be finished: written/uploaded entries whose
digest is already on-chain are marked submitted, the others are uploaded and submitted again
(duplicates are impossible: the chain refuses a digest twice); reserved entries are dropped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STAGES = ("reserved", "written", "uploaded", "submitted")


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, Any] = {"next_nonce": {}, "entries": {}}
        if path.exists():
            self.data = json.loads(path.read_text())

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def reserve(self, pool_id: int, step: int) -> int:
        """Take the next nonce for (pool, step) and record it; returns the nonce."""
        key = f"{pool_id}:{step}"
        nonce = self.data["next_nonce"].get(key, 0)
        self.data["next_nonce"][key] = nonce + 1
        self.data["entries"][f"{key}:{nonce}"] = {"pool_id": pool_id, "step": step, "nonce": nonce, "stage": "reserved"}
        self._save()
        return nonce

    def advance(self, pool_id: int, step: int, nonce: int, stage: str, **fields: Any) -> None:
        assert stage in STAGES
        entry = self.data["entries"][f"{pool_id}:{step}:{nonce}"]
        entry.update(fields, stage=stage)
        self._save()

    def drop(self, pool_id: int, step: int, nonce: int) -> None:
        self.data["entries"].pop(f"{pool_id}:{step}:{nonce}", None)
        self._save()

    def entries(self, stage: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.data["entries"].values() if stage is None or e["stage"] == stage]

    def submitted_count(self, pool_id: int, step: int) -> int:
        return sum(1 for e in self.entries("submitted") if e["pool_id"] == pool_id and e["step"] == step)
