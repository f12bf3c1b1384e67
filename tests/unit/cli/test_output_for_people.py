"""Results for people (issue 47, finding 8): amounts in tokens, Unix times as UTC dates with how far off they are on
the chain's clock, tables of counts as `name value` pairs, nothing as `none`; never a Python repr. `--json` keeps
base units and Unix times."""

from __future__ import annotations

import json

import pytest

from cli.output import date, duration, for_people, print_result

NOW = 1_796_601_600  # 2026-12-07 00:00:00 UTC


@pytest.mark.parametrize(("seconds", "text"), [(0, "0 s"), (45, "45 s"), (119, "119 s"), (120, "2 min"),
                                               (3_601, "60 min"), (7_200, "2 h"), (604_800, "7 days")])
def test_a_span_reads_in_the_unit_a_person_thinks_in(seconds: int, text: str) -> None:
    assert duration(seconds) == text


def test_a_time_is_a_utc_date_and_how_far_it_is_from_the_chains_now() -> None:
    assert date(NOW) == "2026-12-07 00:00:00 UTC"
    assert date(NOW + 37, NOW) == "2026-12-07 00:00:37 UTC (in 37 s)"
    assert date(NOW - 3_600, NOW) == "2026-12-06 23:00:00 UTC (60 min ago)"
    assert date(NOW, NOW) == "2026-12-07 00:00:00 UTC (now)"


def test_a_validators_status_for_people_has_no_base_units_unix_times_or_reprs(capsys) -> None:
    result = {"registered": True, "registered_at": NOW - 40, "deregistered_at": None, "bond_withdrawable_at": None,
              "locked": 480 * 10**18, "penalties": {"silence": 5 * 10**18}, "credits": 10**17,
              "submissions": {"pending": 0, "accepted": 2}, "challenges": [], "unbonding_ready_at": 0}
    print_result(result, as_json=False, now=NOW)
    assert capsys.readouterr().out.splitlines() == [
        "registered            yes",
        "registered_at         2026-12-06 23:59:20 UTC (40 s ago)",
        "deregistered_at       none",
        "bond_withdrawable_at  none",
        "locked                480 tokens",
        "penalties             silence 5 tokens",
        "credits               0.1 tokens",
        "submissions           pending 0, accepted 2",
        "challenges            none",
        "unbonding_ready_at    none"]
    print_result(result, as_json=True, now=NOW)  # scripts: base units (as strings past 2^53) and Unix times
    assert json.loads(capsys.readouterr().out) == {**result, "locked": str(480 * 10**18),
                                                  "penalties": {"silence": str(5 * 10**18)}, "credits": str(10**17)}


def test_a_count_that_is_not_an_amount_stays_a_number() -> None:
    assert for_people("verdicts", 3) == "3" and for_people("challenge_window_s", 300) == "300"


def test_a_time_no_calendar_holds_stays_a_number() -> None:
    """A chain value past year 9999 (a bond locked until 2^40 s) is printed as the number, not a traceback."""
    assert date(2**40) == f"{2**40} (Unix time)" and date(2**64, now=0) == f"{2**64} (Unix time)"
