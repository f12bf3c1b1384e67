"""A validator's state folder belongs to one pool and one daemon at a time.

The folder's files (`cursor.json`, `verdicts.jsonl`, `retries.json`, the court's and the margin book's journals)
follow one pool's events: a daemon of another pool that resumed them would start from the first pool's cursor and
skip its own earlier submissions unjudged, and two daemons writing one folder would interleave their journals. So
the folder names its owner in `pool.json` (chain id, ComputePool address, pool id), written when it is first used,
and a daemon holds `daemon.lock` while it runs (cli.daemon_lock: the kernel drops it when the process dies, kill -9
included). Another pool's daemon, or a second daemon of the same pool, is refused with one line naming the folder and
its owner.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from cli.daemon_lock import DaemonLock
from cli.errors import UsageError

OWNER_FILE = "pool.json"
LOCK_FILE = "daemon.lock"
DEFAULT_ROOT = Path(".validator")


def default_state_dir(address: str, pool_id: int) -> Path:
    """`validator start`'s folder without --state-dir: one per validator and pool."""
    return DEFAULT_ROOT / address / f"pool{pool_id}"


def earlier_default_in_use(address: str) -> Path | None:
    """The folder that was the default before folders were kept per pool (`.validator/<address>`), when it holds a
    daemon's state: its owner resumes it with --state-dir, it is never moved or read unasked."""
    folder = DEFAULT_ROOT / address
    return folder if (folder / "cursor.json").exists() else None


@dataclass(frozen=True)
class FolderOwner:
    chain_id: int
    compute_pool: str
    """The ComputePool's address, lower-case."""
    pool_id: int

    def describe(self) -> str:
        return f"pool {self.pool_id} of ComputePool {self.compute_pool} on chain {self.chain_id}"


class StateFolder:
    """`claim()` a folder for a daemon; `release()` when the daemon closes."""

    def __init__(self, path: Path, lock: DaemonLock) -> None:
        self.path, self.lock = path, lock

    @classmethod
    def claim(cls, path: Path, owner: FolderOwner) -> StateFolder:
        """The folder, created if absent, locked for this daemon and owned by `owner`; UsageError (one line) when
        another daemon holds it or another pool owns it. A folder from before owners were recorded is adopted."""
        path = Path(path)
        lock = DaemonLock.hold(path / LOCK_FILE, f"state folder {path} is in use by another validator daemon (it holds "
                                                 f"{path / LOCK_FILE}); give this one its own --state-dir")
        try:
            _check_owner(path, owner)
        except BaseException:
            lock.release()
            raise
        return cls(path, lock)

    def release(self) -> None:
        self.lock.release()


def _check_owner(path: Path, owner: FolderOwner) -> None:
    file = path / OWNER_FILE
    if not file.exists():
        temporary = file.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(owner)) + "\n")
        os.replace(temporary, file)
        return
    try:
        recorded = FolderOwner(**json.loads(file.read_text()))
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{file} is damaged ({exc}); it names the pool whose state the folder holds") from None
    if recorded != owner:
        raise UsageError(f"state folder {path} holds the state of {recorded.describe()}, not {owner.describe()}: "
                         "give each pool its own --state-dir")
