"""The `[pool.batches]` bounds `pool create` checks before any transaction, mirroring `WorkBatches.check`
(docs/protocol.md §1.4, R1.23–R1.25): each rule refused on each side it has, in one line naming the rule; the shipped
example passes; a court pool cannot have the table (WorkBatches refuses court pools)."""

from __future__ import annotations

import tomllib

import pytest
from pydantic import ValidationError

from cli.errors import UsageError
from deploy.pools import BatchesConfig, check_batch_bounds, load_pool_config, pool_config
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
E18 = 10**18
ROLES = {role: {"address": "0x" + f"{n + 1:02x}" * 20} for n, role in enumerate(("trainer", "validator"))}
INIT = {"task": "0x" + "ab" * 32, "base_checkpoint": "0x" + "cd" * 32}


def _pool(**batches):
    cfg = load_pool_config(EXAMPLES / "pool-batches.toml", {"roles": ROLES}, INIT)
    if batches:
        cfg.batches = BatchesConfig(**(cfg.batches.model_dump() | batches))
    return cfg


def _refused(rule: str, **batches) -> str:
    with pytest.raises(UsageError) as refused:
        check_batch_bounds(_pool(**batches))
    line = str(refused.value)
    assert line.startswith("batches: ") and f"(docs/protocol.md {rule})" in line and "\n" not in line
    return line


def test_the_shipped_batched_pool_passes_at_its_least_bond():
    cfg = _pool()
    check_batch_bounds(cfg)
    b = cfg.batches
    assert b.params() == (600, 16, 2400 * E18) and b.budget_funding == 10_000 * E18
    assert b.least_bond(cfg.slash_amount, cfg.challenge_window_s) == b.worker_bond  # 50 × 16 × (2 + ⌈60/600⌉)
    check_batch_bounds(load_pool_config(EXAMPLES / "pool.toml", {"roles": ROLES}, INIT))  # no table: nothing


def test_each_rule_is_refused_on_each_side():
    _refused("R1.23", epoch_length_s=59)
    _refused("R1.23", epoch_length_s=7 * 24 * 3600 + 1)
    _refused("R1.24", max_leaves=0)
    _refused("R1.24", max_leaves=4097)
    assert "2400000000000000000000" in _refused("R1.25", worker_bond=2400 * E18 - 1)
    check_batch_bounds(_pool(epoch_length_s=60, worker_bond=50 * E18 * 16 * 3))  # ⌈60/60⌉ = 1


def test_a_court_pool_cannot_settle_in_batches():
    text = (EXAMPLES / "pool-court.toml").read_text() + "\n[pool.batches]\nepoch_length_s = 600\nmax_leaves = 1\n" \
        'worker_bond = "1e18"\n'
    with pytest.raises(ValidationError, match="permissioned pool"):
        pool_config(EXAMPLES / "x.toml", tomllib.loads(text), {"roles": ROLES}, INIT)
