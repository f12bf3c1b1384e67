"""Where the trainer's rollouts come from.

A WorkSource hands out each rollout file once. Its cursor (`state()`) is saved in the
same atomic checkpoint as the model and the trainer's buffer of not-yet-trained samples,
so after a restart every file is consumed exactly once: files handed out before the last
checkpoint are never handed out again, files handed out after it are handed out again
(their effect on training was lost with the crash).

Here: `LocalDirectorySource` (files written by local worker processes). The validator
issue adds a ledger-gated source that yields only work accepted on-chain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from inference.local_store import TrainerProgress, write_progress
from protocol.rollouts import RolloutBatch, RolloutFileError, read_rollout_file

FILES_PER_STEP_WINDOW = 4


class WorkItem(BaseModel):
    """One unit of accepted work: a validated rollout file and its unique id."""

    model_config = ConfigDict(frozen=True)

    id: str
    batch: RolloutBatch


class WorkSource(Protocol):
    """A stream of work items, each handed out once per cursor."""

    def poll(self) -> list[WorkItem]:
        """Items not handed out yet, oldest first (may be empty)."""
        ...

    def state(self) -> dict[str, Any]:
        """The cursor to persist with a checkpoint."""
        ...

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a persisted cursor."""
        ...

    def report(self, step: int, waiting: bool) -> None:
        """Tell producers where the trainer stands (a no-op where they do not listen)."""
        ...


class LocalDirectorySource:
    """Rollout files (`*.parquet`) in a folder, oldest first by (mtime, name).

    A file that fails validation is marked consumed and counted in `rejected`; it is
    never retried. Temporary files (names starting with '.') are ignored.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._consumed: set[str] = set()
        self.rejected: list[tuple[str, str]] = []
        self._last_report: TrainerProgress | None = None
        self._consumed_at_step: dict[int, int] = {}

    def poll(self) -> list[WorkItem]:
        fresh = []
        for path in self.folder.glob("*.parquet"):
            if path.name.startswith(".") or path.name in self._consumed:
                continue
            try:
                fresh.append((path.stat().st_mtime_ns, path.name, path))
            except FileNotFoundError:
                continue
        items = []
        for _, name, path in sorted(fresh):
            self._consumed.add(name)
            try:
                items.append(WorkItem(id=name, batch=read_rollout_file(path)))
            except RolloutFileError as exc:
                self.rejected.append((name, str(exc)))
        return items

    def state(self) -> dict[str, Any]:
        return {"consumed": sorted(self._consumed), "rejected": self.rejected}

    def restore(self, state: dict[str, Any]) -> None:
        self._consumed = set(state.get("consumed", []))
        self.rejected = [tuple(r) for r in state.get("rejected", [])]  # type: ignore[misc]

    def report(self, step: int, waiting: bool) -> None:
        consumed = len(self._consumed)
        self._consumed_at_step.setdefault(step, consumed)
        # files needed per step over the last few steps (it falls as the policy improves)
        window_start = max(0, step - FILES_PER_STEP_WINDOW)
        since = self._consumed_at_step.get(window_start)
        files_per_step = (self._consumed_at_step[step] - since) / (step - window_start) if since is not None and step > window_start else 1.0
        progress = TrainerProgress(step=step, consumed=consumed, waiting=waiting, files_per_step=files_per_step)
        if progress != self._last_report:
            write_progress(self.folder, progress)
            self._last_report = progress


class InMemorySource:
    """Rollout batches handed over in-process (the synchronous baseline, tests).

    Its cursor is the number of items handed out; `put` order is consumption order.
    """

    def __init__(self) -> None:
        self._items: list[WorkItem] = []
        self._cursor = 0

    def put(self, item_id: str, batch: RolloutBatch) -> None:
        self._items.append(WorkItem(id=item_id, batch=batch))

    def poll(self) -> list[WorkItem]:
        items = self._items[self._cursor :]
        self._cursor = len(self._items)
        return items

    def state(self) -> dict[str, Any]:
        return {"cursor": self._cursor}

    def restore(self, state: dict[str, Any]) -> None:
        self._cursor = int(state.get("cursor", 0))

    def report(self, step: int, waiting: bool) -> None:
        """Nobody listens in-process."""
