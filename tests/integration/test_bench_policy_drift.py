"""bench.policy_drift on a small run: the recalibrated rules are the validator's own (`RunSpec.verification_for`),
never tighter than the creation rules, and both judge the same honest and attacking files; bad arguments are
refused with one line."""

from __future__ import annotations

import json
import subprocess
import sys

from rich.console import Console

from bench.policy_drift import ATTACKS, run
from tests.support.paths import ROOT


def test_both_rule_sets_judge_the_same_files_and_the_recalibrated_ones_are_never_tighter() -> None:
    r = run(ROOT / "examples/run-attacks.toml", early=0, late=10, files=4, attack_files=1, calibration_prompts=8,
            console=Console(quiet=True))
    creation, recalibrated = r["rules"]["creation"], r["rules"]["recalibrated"]
    assert recalibrated["logit_tolerance"] >= creation["logit_tolerance"] > 0
    assert all(b >= a for a, b in zip(creation["margin_tail"], recalibrated["margin_tail"]))
    assert {name: h["n"] for name, h in r["honest"].items()} == {"creation": 4, "recalibrated": 4}
    assert all(h["margin_null_use"] >= 0 for h in r["honest"].values())
    assert set(r["attacks"]["creation"]) == set(r["attacks"]["recalibrated"]) == set(ATTACKS)
    json.dumps(r, allow_nan=False)


def test_bad_arguments_are_refused_with_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.policy_drift", "--files", "0"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("policy_drift.py: error: --files")
