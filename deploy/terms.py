"""The deploy room's plain terms, shared by its command lines (deploy/cli.py, deploy/pool_cli.py) and what the
commands do (deploy/contracts.py, deploy/pools.py): the contracts' bounds and defaults, reading a pool TOML, the
half-created pool's error. Standard library only, so that a command checks its input before web3 loads."""

from __future__ import annotations

import tomllib
from pathlib import Path

from cli.errors import UsageError

MIN_UNBONDING_DELAY_S = 3600
MAX_UNBONDING_DELAY_S = 90 * 24 * 3600
"""StakeManager's bounds on the unbonding delay (MIN_UNBONDING_DELAY, MAX_UNBONDING_DELAY)."""
DEPLOY_COURT_MIN_PERIOD_S = 36
"""`devnet deploy --court-min-period`'s default (the court's `minPeriod`): three 12-second blocks, Ethereum's slot
time. The shipped pool configs (examples/pool*.toml) are valid on it (the devnet's court takes 5 s)."""
IPFS_CHECK_TIMEOUT_S = 10.0
"""How long `pool create` waits for the run spec and the base checkpoint's manifest on IPFS."""


class PoolHalfCreated(Exception):
    """`pool create` failed after its first transaction; the message names the pool and how to finish it."""


def read_pool_toml(path: Path) -> dict:
    """A pool TOML's tables, or a UsageError: the file missing, no TOML, or no [pool] table."""
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"pool config {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"pool config {path} is not valid TOML: {exc}") from None
    if "pool" not in doc:
        raise UsageError(f"pool config {path} has no [pool] table")
    return doc
