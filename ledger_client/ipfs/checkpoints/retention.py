"""Pin retention: a node keeps the newest versions of a checkpoint pinned, and only those."""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ledger_client.ipfs.checkpoints.files import (
    atomic_write,
)
from ledger_client.ipfs.kubo import KuboClient


class RetainedVersion(BaseModel):
    """One checkpoint version this node keeps pinned."""

    model_config = ConfigDict(extra="forbid")

    step: int
    manifest_cid: str
    cids: list[str]
    path: str | None = None


class _RetentionState(BaseModel):
    versions: list[RetainedVersion] = []


class PinRetention:
    """Keeps the newest ``keep`` (``async_level + 1``) checkpoint versions pinned on a Kubo node
    and unpins (and deletes the local folders of) older ones. Its ledger is a JSON file."""

    def __init__(self, kubo: KuboClient, state_file: Path, keep: int) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.kubo = kubo
        self.state_file = Path(state_file)
        self.keep = keep

    def versions(self) -> list[RetainedVersion]:
        """Retained versions, newest first."""
        if not self.state_file.exists():
            return []
        return _RetentionState.model_validate_json(self.state_file.read_text()).versions

    def record(self, version: RetainedVersion) -> list[RetainedVersion]:
        """Add ``version``; unpin what falls out of the newest ``keep``; return what was dropped.

        A version older than the newest ``keep`` is kept too until the next call: it was fetched to be
        used now (a validator checking, or judging a dispute over, old work), so its folder must not
        vanish before it is loaded. A CID that a kept version still uses (an unchanged shard) stays pinned."""
        versions = [v for v in self.versions() if v.manifest_cid != version.manifest_cid]
        versions = sorted([version, *versions], key=lambda v: v.step, reverse=True)
        kept, dropped = versions[: self.keep], versions[self.keep :]
        if version in dropped:
            dropped.remove(version)
            kept.append(version)
        still_used = {cid for v in kept for cid in [v.manifest_cid, *v.cids]}
        unpin = [cid for old in dropped for cid in [old.manifest_cid, *old.cids] if cid not in still_used]
        self.kubo.pin_rm(*dict.fromkeys(unpin))
        for old in dropped:
            if old.path and all(old.path != v.path for v in kept):
                shutil.rmtree(old.path, ignore_errors=True)
        atomic_write(self.state_file, _RetentionState(versions=kept).model_dump_json(indent=1).encode())
        return dropped
