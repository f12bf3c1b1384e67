"""`worker deallocate` and `worker unstake [--leave POOL]` against a real anvil: allocated stake that open
work needs stays locked, the rest returns to free bonded stake, and refusals are one line."""

from __future__ import annotations

import json

import pytest

from ledger_client.chain.ledger import save_deployment
from worker.cli import main as worker_main

TOKENS = 10**18


@pytest.fixture
def cli(chain, tmp_path, capsys):
    deployments = tmp_path / "deployments.json"
    save_deployment(deployments, chain.deployment)

    def run(n: int, *args: str) -> tuple[int, dict | str]:
        chain_args = ["--rpc-url", chain.anvil.rpc_url, "--deployments", str(deployments),
                      "--key", chain.accounts[4 + n].key.to_0x_hex()]
        code = worker_main([args[0], *chain_args, "--json", *args[1:]])
        out, err = capsys.readouterr()
        return code, (json.loads(out) if code == 0 else err)

    return run


def test_deallocate_keeps_what_open_work_needs_and_returns_the_rest(chain, cli):
    worker = chain.worker(0)
    worker.ensure_allocation(chain.pool_id, 300 * TOKENS)
    # one open work keeps one full slash (50) locked; minStake only gates the next submission
    chain.submit(0, b"\x01" * 32, 4)
    bonded_before = worker.stake.bonded_of(worker.address)
    code, result = cli(0, "deallocate", "--pool", str(chain.pool_id))
    assert code == 0 and result == {"pool_id": chain.pool_id, "deallocated": str(250 * TOKENS),
                                 "allocation": str(50 * TOKENS)}  # amounts as decimal strings
    assert worker.stake.bonded_of(worker.address) == bonded_before + 250 * TOKENS
    code, result = cli(0, "deallocate", "--pool", str(chain.pool_id))  # nothing left to free
    assert code == 0 and result["deallocated"] == 0


def test_unstake_refuses_allocated_stake_in_one_line(chain, cli):
    worker = chain.worker(1)
    assert worker.stake.bonded_of(worker.address) == 0  # everything bonded is allocated to the pool
    code, err = cli(1, "unstake")
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: cannot unstake 0") and "worker deallocate --pool N" in line


def test_unstake_leave_frees_the_pool_allocation_and_starts_unbonding(chain, cli):
    worker = chain.worker(1)
    code, result = cli(1, "unstake", "--leave", str(chain.pool_id))
    assert code == 0 and result["unbonding"] == str(chain.config.min_stake)
    assert not worker.pool.is_member(chain.pool_id, worker.address)
    assert worker.pool.get_member(chain.pool_id, worker.address).allocation == 0
    assert worker.stake.bonded_of(worker.address) == 0
