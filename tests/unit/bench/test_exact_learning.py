"""bench.exact --learning's figure: steps_ratio = median exact-mode steps to target / median float steps."""

from bench.exact import learning_figures, median_steps


def test_the_median_ranks_a_missed_run_above_every_reached_one():
    assert median_steps([120, 95, 140]) == 120
    assert median_steps([120, None, 95]) == 120  # one miss of three moves the median up, not out
    assert median_steps([None, 95, None]) is None  # the median run missed: no figure
    assert median_steps([90, 110]) == 100


def test_steps_ratio_is_the_ratio_of_the_medians_and_null_with_a_reason_when_a_median_missed():
    figures = learning_figures({"float": [100, 120, 110], "exact": [130, None, 115]})
    assert figures["median_steps"] == {"float": 110, "exact": 130}
    assert figures["steps_ratio"] == round(130 / 110, 3) and "null_reasons" not in figures
    missed = learning_figures({"float": [100, 120, 110], "exact": [None, None, 115]})
    assert missed["steps_ratio"] is None
    assert missed["null_reasons"] == {"steps_ratio": "the median exact run missed the target"}
