"""bench.scale's parts that need no chain: the pacing figures (the real `Pacer` and `DemandEstimate`, bench.pacing)
hold the issue's bound at 10 and 1,000 workers, and a bad count is refused in one line. The whole run's JSON shape is
tests/integration/test_bench_scale.py's (it needs anvil and Kubo)."""

import pytest

from bench.pacing import simulate_pool
from bench.scale import main, pacing


@pytest.mark.parametrize("workers", [10, 1_000])
def test_the_pool_makes_at_most_one_and_a_half_times_what_the_trainer_asks(workers):
    over_asked, over_trained = simulate_pool(workers, steps=30, churn=0.02, seed=workers)
    assert over_asked <= 1.5 and over_trained <= 1.5, (over_asked, over_trained)


def test_the_pacing_keys_are_those_the_bench_prints():
    figures = pacing(steps=15)
    assert set(figures) == {"pacing_overproduction_1000", "pacing_over_trained_1000",
                            "pacing_overproduction_10000", "pacing_over_trained_10000"}
    assert all(0 < v <= 1.5 for v in figures.values()), figures


@pytest.mark.parametrize("args", [["--workers", "0"], ["--gap-blocks", "-1"], ["--idle-s", "0"]])
def test_a_bad_count_is_refused_in_one_line(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:")
