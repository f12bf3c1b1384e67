"""bench.noise_scale on a small run: each tolerance is fitted on one half of the positions (so it admits every one
of them) and judged on the other; bad arguments are refused with one line."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from bench.noise_scale import judge, measure
from tests.support.paths import ROOT


def test_a_tolerance_fitted_on_half_the_positions_admits_all_of_them():
    deviation = torch.tensor([0.01, 0.02, 0.04, 0.03])
    gap = torch.tensor([0.05, 0.5, 0.07, 1.0])
    scale = torch.tensor([1.0, 2.0, 2.0, 1.0])
    fit, held = torch.tensor([0, 1]), torch.tensor([2, 3])
    absolute = judge(deviation, gap, torch.ones(4), fit, held)
    assert absolute["fitted"] == 0.02 and absolute["false_positives"] == 2 and "correlation" not in absolute
    relative = judge(deviation, gap, scale, fit, held)  # 0.01 per unit of scale: 0.02 and 0.01 on the held half
    assert relative["fitted"] == 0.01 and relative["false_positives"] == 2
    assert relative["second_token_admitted"] == 0.0 and -1 <= relative["correlation"] <= 1


def test_the_bf16_noise_of_an_untrained_policy_is_measured_at_every_position():
    r = measure(ROOT / "examples/run-attacks.toml", warm_steps=0, files=2, seed=0)
    assert r["positions"] > 0 and r["vocab"] > 0
    assert 0 < r["deviation"]["median"] <= r["deviation"]["p99"] <= r["deviation"]["max"]
    assert r["absolute"]["fitted"] <= r["deviation"]["max"]
    assert set(r["relative"]) == {"max |logit|", "max - mean", "std", "rms"}
    json.dumps(r, allow_nan=False)


def test_bad_arguments_are_refused_with_one_line():
    done = subprocess.run([sys.executable, "-m", "bench.noise_scale", "--warm-steps", "a,b"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].endswith("got 'a,b'")
