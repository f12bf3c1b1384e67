"""The shipped court pool on a production Ethereum client (issue 47): examples/pool-court.toml as shipped, on `devnet
deploy`'s default court, with the project's own commands against `geth --dev` (tests/support/geth_pool.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.geth_pool import POLL_S, TEST_TIMEOUT_S, TRAIN_AND_CLAIM, GethPool, geth  # noqa: F401 (fixture)


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_a_court_pool_from_the_shipped_example_runs_on_geth_with_the_default_deployment(geth, kubo_node, tmp_path):  # noqa: F811
    """Minimum period 36 s: a bonded validator registers, is drawn once its activation delay has passed on the
    chain, and judges the worker's file; the trainer steps on it and the worker is paid."""
    pool = GethPool(geth, kubo_node, tmp_path)
    pool.deploy_and_config("pool-court.toml")
    out = pool.shell(f"""
pool create --config pool.toml $CHAIN --key $KEY_OWNER --kubo-api $KUBO
validator start --pool 1 $CHAIN --key $KEY_VALIDATOR --kubo-api $KUBO --state-dir validator > validator.log 2>&1 &
VALIDATOR=$!
until validator status --pool 1 $CHAIN --key $KEY_VALIDATOR --json | grep -q '"active": true'; do sleep {POLL_S}; done
""" + TRAIN_AND_CLAIM + """
validator status --pool 1 $CHAIN --key $KEY_VALIDATOR --json
""")
    assert "judged_by" in out and "ValidatorCourt" in out  # pool create names the court that judges the pool
    status = json.loads(out[out.rindex('{\n  "validator"'):])
    assert status["verdicts"] == 1 and status["verdicts_attested"] == 1 and status["verdicts_final"] == 1
    pool.assert_paid()
