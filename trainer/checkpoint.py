"""Trainer checkpoints: everything needed to resume exactly, written atomically.

`<root>/step_000012/` holds `state.pt` (model, optimizer, scheduler, the retained old
policies, RNG state) and `trainer.json` (step, work-source cursor, buffered samples,
counters). The folder is written under a temporary name and renamed, then `latest`
is replaced atomically: the cursor and the weights it belongs to are one commit.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

LATEST = "latest"


class TrainerStateError(Exception):
    """A trainer checkpoint (model, optimizer, RNG and cursor state for resuming) is unreadable."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: tensors and the JSON-able trainer state."""

    step: int
    tensors: dict[str, Any]
    trainer: dict[str, Any]
    path: Path | None = None


def save_checkpoint(root: str | Path, step: int, tensors: dict[str, Any], trainer: dict[str, Any], keep: int = 2) -> Path:
    """Write checkpoint `step` atomically and prune all but the newest `keep`."""
    return commit_checkpoint(root, step, staging_folder(root, step), tensors, trainer, keep)


def staging_folder(root: str | Path, step: int) -> Path:
    """A fresh temporary folder for checkpoint `step` (more files, e.g. sharded state, may go in
    before `commit_checkpoint`)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root, prefix=f".step_{step:06d}."))


def commit_checkpoint(root: str | Path, step: int, tmp: Path, tensors: dict[str, Any], trainer: dict[str, Any],
                      keep: int = 2) -> Path:
    """Write `tensors` and `trainer` into the staging folder `tmp`, rename it to checkpoint `step`,
    point `latest` at it and prune all but the newest `keep`."""
    root = Path(root)
    final = root / f"step_{step:06d}"
    try:
        torch.save(tensors, tmp / "state.pt")
        (tmp / "trainer.json").write_text(json.dumps({"step": step, **trainer}))
    except (RuntimeError, OSError) as exc:  # torch's writer reports a full disk as "basic_ios::clear: iostream error"
        shutil.rmtree(tmp, ignore_errors=True)  # the previous checkpoint stays the latest
        raise OSError(errno.EIO, f"could not write the trainer checkpoint of step {step} "
                                 f"({shutil.disk_usage(root).free / 2**20:.0f} MiB free on its disk): {exc}",
                      str(tmp)) from None
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    fd, pointer = tempfile.mkstemp(dir=root, prefix=".latest.")
    with os.fdopen(fd, "w") as handle:
        handle.write(final.name)
    os.replace(pointer, root / LATEST)
    for old in sorted(root.glob("step_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint_folder(root: str | Path) -> Path | None:
    """The folder of the newest complete checkpoint under `root` (nothing read from it), or None."""
    root = Path(root)
    try:
        return root / (root / LATEST).read_text().strip()
    except FileNotFoundError:
        return None


def load_latest_checkpoint(root: str | Path) -> Checkpoint | None:
    """The newest complete checkpoint under `root`, or None when there is none."""
    folder = latest_checkpoint_folder(root)
    if folder is None:
        return None
    try:
        trainer = json.loads((folder / "trainer.json").read_text())
        tensors = torch.load(folder / "state.pt", weights_only=False, map_location="cpu")  # portable: CUDA runs resume anywhere
    except (OSError, json.JSONDecodeError, RuntimeError) as exc:
        raise TrainerStateError(f"checkpoint {folder} is unreadable: {exc}") from exc
    return Checkpoint(step=int(trainer.pop("step")), tensors=tensors, trainer=trainer, path=folder)
