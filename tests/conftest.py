import os

import pytest

for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # as proofs.philox_triton pins it: no Triton 3.9 notice on stderr
"""One intra-op thread for torch in every test process and the role processes it starts (they inherit it). `make test`
runs four xdist workers and their daemons on two cores; torch's OpenMP threads, one per core by default, spin at each
barrier while another process holds the core: beside three busy processes, `validator calibrate` took 68 s of CPU
with two threads and 16 s with one (docs/notes/suite-time.md). Tests of a thread count set it themselves."""

pytest_plugins = ["tests.support.conftest_kubo", "tests.support.conftest_chain"]
"""The fixtures of a real Kubo and a real anvil chain, for every tier (tests/unit/ asks for none of them:
tests/test_architecture.py)."""

LONGEST_FIRST = (
    "test_geth.py", "test_geth_court.py", "test_court_validators.py", "test_demo_repeatable.py", "test_court_finality.py",
    "test_hf_protocol.py", "test_distributed_trainer.py", "test_forced_error_court.py", "test_court_rounds.py",
    "test_guides.py", "test_hostile_files.py", "test_attacks.py", "test_faults.py", "test_validator_daemon.py",
    "test_toploc.py", "test_bench_protocol.py", "test_hostile_answers.py", "test_reward_hacking.py",
    "test_exit_codes.py", "test_environment_pool.py", "test_signals.py", "test_dashboard_browser.py",
    "test_bench_policy_drift.py", "test_toploc_attacks.py", "test_exact_pool.py", "test_protocol.py",
)
"""Modules by wall time, longest first (`--durations` of a full run). `make test` runs the modules in parallel
(pytest-xdist `--dist loadfile --no-loadscope-reorder`: one module per worker at a time, in collection order;
xdist's own order puts the modules with the most tests first, which left the one-test demo module for last):
starting the longest first keeps one of them from being the run's tail. Named by file name, wherever under tests/
the module lives (unit/<room>/, integration/, e2e/): the names are unique."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: order within a module kept
