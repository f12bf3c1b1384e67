"""The local devnet as every participant finds it: `devnet up` writes `<state dir>/devnet.json` (RPC URL,
deployments file, Kubo API, the role accounts); commands read it to default their chain and IPFS options."""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_DEVNET_DIR = Path(".devnet")
DEV_CHAIN_ID = 31337
"""The devnet's chain id (anvil's default): roles pick devnet defaults on it, e.g. the trainer's fast mode."""


class DevnetCorrupt(ValueError):
    """devnet.json exists but cannot be read."""


def devnet_file(state_dir: Path | None = None) -> Path:
    return (state_dir or DEFAULT_DEVNET_DIR) / "devnet.json"


def load_devnet_info(state_dir: Path | None = None) -> dict | None:
    """The devnet.json written by `devnet up`, if there is one."""
    path = devnet_file(state_dir)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise DevnetCorrupt(f"{path} is corrupt; run `devnet down` then `devnet up`") from None
