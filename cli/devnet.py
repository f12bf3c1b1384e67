"""The local devnet as every participant finds it: `devnet up` writes `<state dir>/devnet.json` (RPC URL,
deployments file, Kubo API, the role accounts); commands read it to default their chain and IPFS options."""

from __future__ import annotations

import json
import os
from pathlib import Path

DEVNET_DIR_ENV = "PROOFSWARM_DEVNET_DIR"
DEVNET_DIR_HELP = f"devnet state folder (default: ${DEVNET_DIR_ENV}, else the nearest .devnet holding a devnet at or above the current folder, else ./.devnet)"
DEV_CHAIN_ID = 31337
"""The devnet's chain id (anvil's default): roles pick devnet defaults on it, e.g. the trainer's fast mode."""


class DevnetCorrupt(ValueError):
    """devnet.json exists but cannot be read."""


def default_devnet_dir() -> Path:
    """Where commands look for the devnet when no folder is given: $PROOFSWARM_DEVNET_DIR; else the nearest
    `.devnet` with a devnet.json in the current folder or one above it (so a command run from a sub-folder of
    the checkout finds the devnet `make demo` started); else `./.devnet`, where `devnet up` starts one."""
    if configured := os.environ.get(DEVNET_DIR_ENV):
        return Path(configured)
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / ".devnet" / "devnet.json").is_file():
            return folder / ".devnet"
    return Path(".devnet")


def devnet_file(state_dir: Path | None = None) -> Path:
    return (state_dir or default_devnet_dir()) / "devnet.json"


def load_devnet_info(state_dir: Path | None = None) -> dict | None:
    """The devnet.json written by `devnet up`, if there is one."""
    path = devnet_file(state_dir)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise DevnetCorrupt(f"{path} is corrupt; run `devnet down` then `devnet up`") from None


TRAINER_INIT_FILE = "trainer-init.json"
"""What the last `trainer init` on the devnet published (task, base_checkpoint), for pool configs' `@init`."""


def record_trainer_init(state_dir: Path, digests: dict[str, str]) -> None:
    """Record `trainer init`'s digests in the devnet's folder (replacing the previous run's)."""
    tmp = state_dir / f".{TRAINER_INIT_FILE}.tmp"
    tmp.write_text(json.dumps(digests, indent=2) + "\n")
    os.replace(tmp, state_dir / TRAINER_INIT_FILE)


def load_trainer_init(state_dir: Path | None = None) -> dict[str, str] | None:
    """The digests `record_trainer_init` recorded in the devnet's folder, if any."""
    path = (state_dir or default_devnet_dir()) / TRAINER_INIT_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError:
        raise DevnetCorrupt(f"{path} is corrupt; run `trainer init` again") from None
