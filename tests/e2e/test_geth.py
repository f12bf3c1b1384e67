"""The protocol on a production Ethereum client (issue 47): the project's own commands — `devnet deploy`, `devnet
mint`, `trainer init`, `pool create`, `validator start`, `worker start`, `trainer start`, `worker claim` — run unchanged
against `geth --dev` for a permissioned pool (tests/support/geth_pool.py). The shipped court pool is in
test_geth_court.py, a module of its own so the two run side by side. The pinned geth is built by
scripts/install_geth.sh (`make test` runs it); the tests skip, saying so, only where none could be built."""

from __future__ import annotations

import pytest

STALL_BOUND_WINDOWS = {"challenge_window_s": 300, "reward_lock_s": 301}
"""geth's clock is the wall clock, so the shipped 60 s challenge window is a pace: in `make test`, beside the heaviest
modules, the validator's check of the file took longer (its verdict came after the window and the work expired).
300 s bounds a stall instead (the check takes seconds alone, about a minute at load 15); the worker's claim waits out
the 301 s reward lock, asleep. Every second of it is the suite's longest test's (issue 47: ≤ 15 min)."""

from tests.support.geth_pool import TEST_TIMEOUT_S, TRAIN_AND_CLAIM, GethPool, geth  # noqa: F401 (fixture)


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_a_permissioned_pool_goes_from_deploy_to_a_training_step_and_a_paid_worker_on_geth(geth, kubo_node, tmp_path):  # noqa: F811
    pool = GethPool(geth, kubo_node, tmp_path)
    pool.deploy_and_config("pool.toml", **STALL_BOUND_WINDOWS)
    pool.shell("""
pool create --config pool.toml $CHAIN --key $KEY_OWNER --kubo-api $KUBO
validator start --pool 1 $CHAIN --key $KEY_VALIDATOR --kubo-api $KUBO --state-dir validator > validator.log 2>&1 &
VALIDATOR=$!
""" + TRAIN_AND_CLAIM)
    pool.assert_paid()
