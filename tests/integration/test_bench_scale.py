"""`python -m bench.scale` on a tiny pool (2 worker daemons × 2 files on anvil with 2 s blocks, a real validator daemon
and trainer intake, Kubo) and tiny histories: one JSON line with every key issue 46 names, each key's scale, the
bounded keys compared with their bounds, and the live pool's books balanced (every file judged and honest ones
accepted; no eth_getLogs range over the page limit the roles were built with)."""

from __future__ import annotations

import json

import pytest

from bench.scale import BOUNDS, main
from deploy.anvil import find_anvil
from deploy.kubo_node import KuboBinaryNotFound, find_ipfs_binary
from ledger_client.chain.errors import LedgerError

KEYS = {"workers", "files_per_s_accepted", "rpc_per_worker_s", "rpc_per_file", "max_logs_range_blocks",
        "trainer_ms_per_event_10m", "trainer_state_mb_per_step_10m", "explorer_p99_ms_1m",
        "pacing_overproduction_1000", "pacing_overproduction_10000", "validator_cpu_per_file_ms"}


def test_one_tiny_run_prints_every_key_with_its_scale(capsys):
    try:
        find_anvil(), find_ipfs_binary()
    except (LedgerError, KuboBinaryNotFound) as exc:
        pytest.skip(f"real anvil and Kubo needed: {exc}")
    assert main(["--workers", "2", "--files-per-worker", "2", "--idle-s", "4", "--gap-blocks", "0",
                 "--consumed", "1000", "--explorer-files", "500", "--explorer-reps", "1", "--pacing-steps", "12"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert KEYS <= set(result) and KEYS - {"workers"} <= set(result["scale"])
    assert set(result["done_when"]) == set(BOUNDS)
    assert result["workers"] == 2 and result["scale"]["rpc_per_file"]["files"] == 4
    assert result["scale"]["trainer_ms_per_event_10m"]["consumed"] == 1000
    assert result["scale"]["explorer_p99_ms_1m"]["files"] == 500
    live = result["details"]["live"]
    assert live["submitted"] == live["accepted"] == 4 and live["lost"] == 0 and live["challenged"] == 0
    assert result["files_per_s_accepted"] > 0 and result["rpc_per_file"] > 0 and result["validator_cpu_per_file_ms"] > 0
    per_file = live["rpc_per_file_by_request"]  # the breakdown adds up to the figure, each call named by its function
    assert sum(per_file.values()) == pytest.approx(result["rpc_per_file"], abs=0.01 * len(per_file))
    assert "eth_estimateGas ComputePool.submitWork" in per_file and "eth_call" not in per_file
    assert 0 < live["logs_range_observed_max"] <= live["logs_page_limit"] == result["max_logs_range_blocks"]
