"""The attack suite at both profiles, bounded (bench.attacks is the full form): systematic attacks are challenged
by the validator's own checks at the fp32 profile and at a bf16 profile that `validator calibrate` set, and honest
files across dtypes, batch sizes and lengths are not."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from adversaries.samplers import Profile
from bench.attacks import DEFAULT_SPEC, Lab, build_checkpoint, calibrated_profile, run_attacks, run_honest
from protocol.runspec import load_run_spec

# CPU-bound: 116 s alone, over 600 s beside three other heavy modules on two cores (a bound, not a race)
pytestmark = pytest.mark.timeout(1800)

FP32_CAUGHT = ["int8 weights", "T x 0.95, forged", "other weights, forged", "out-of-nucleus tokens (top_p 0.9), forged"]
"""At tolerance 1e-3: TOPLOC sees int8 weights' own proofs; a colder sampler, another model's tokens and tokens out of
the nucleus change tokens the replay pins down, whatever proofs they carry (a 1 % perturbation of one layer, forged,
is missed in some files: bench.attacks measures its rate)."""
BF16_CAUGHT = ["other weights, forged", "wrong_temperature", "tampered_completion", "seeds of its own choosing",
               "int8 weights", "layer 0 x 1.01", "int4 weights (groups of 32), forged"]
"""At the calibrated bf16 tolerance: another model's tokens, T x 0.5 and a changed token stay outside it; int8 weights
and a 1 % change of one layer, shipping their own proofs, pass every chunk's limits but not TOPLOC's chunk-count
test (each chunk a little off: most exceed their length's honest 90 % level); 4-bit weights move the logits ~13x
more than bf16 arithmetic does, so their tokens fail the replay whatever proofs they carry (int8's, forged, move them
1.25x: inside the honest noise, docs/protocol.md)."""


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict:
    spec = load_run_spec(DEFAULT_SPEC)
    folder = build_checkpoint(spec, tmp_path_factory.mktemp("attacks") / "checkpoint", warm_steps=25)
    bf16 = calibrated_profile(folder, DEFAULT_SPEC, prompts=256)  # enough long chunks to bound the honest rates
    fp32 = Profile("fp32", "float32", spec.verification)
    return {"lab": Lab(folder, spec), "fp32": fp32, "bf16": bf16}


@pytest.mark.parametrize(("profile", "names"), [("fp32", FP32_CAUGHT), ("bf16", BF16_CAUGHT)])
def test_systematic_attacks_are_challenged(pool: dict, profile: str, names: list[str]) -> None:
    rows = run_attacks(pool["lab"], pool[profile], 1, names, Console(quiet=True), nonce_base=10)
    assert {r["attack"] for r in rows} == set(names)
    assert all(r["k"] == r["n"] == 1 for r in rows), rows


def test_the_bf16_profile_is_calibrated_and_refuses_a_loose_nucleus(pool: dict) -> None:
    bf16 = pool["bf16"].verification
    assert 1e-3 < bf16.logit_tolerance < 0.1 and bf16.margin_tokens > 0
    rows = run_attacks(pool["lab"], pool["bf16"], 1, ["out-of-nucleus tokens (top_p 0.9), forged"],
                       Console(quiet=True), nonce_base=20)
    assert rows == []  # the pool cannot state top_p 0.9 at this tolerance (protocol.runspec)


def test_honest_files_pass_at_both_profiles(pool: dict, tmp_path: Path) -> None:
    result = run_honest(pool["lab"], [pool["fp32"], pool["bf16"]], 16, Console(quiet=True), tmp_path)
    assert result["fp32"]["files"] == 8 and result["bf16"]["files"] == 16  # fp32 pools judge float32 files only
    for name in ("fp32", "bf16"):
        assert result[name]["false_positives"] == 0, result[name]
        assert not result[name]["worker_challenged"]


def test_a_bias_inside_the_per_token_bound_is_caught_in_a_larger_file(pool: dict, tmp_path: Path) -> None:
    """A 1.9ε logit bias flips ~3 near-ties in a file of 4 prompts, too few for a 1e-6 file test; in a file of 32
    prompts (~4,400 checked tokens) it holds enough of them, and an honest file of that size still passes
    (bench.file_size measures the rates)."""
    from bench.file_size import run_stream

    bias = run_stream(pool["lab"], pool["bf16"], "logit bias 1.9 eps on answer tokens, forged", (32,), 1, 300, tmp_path)
    honest = run_stream(pool["lab"], pool["bf16"], "honest", (32,), 1, 400, tmp_path)
    assert bias[0]["reasons"] == {"SAMPLING": 1} and bias[0]["tokens_per_file"] > 3000, bias
    assert honest[0]["reasons"] == {"accepted": 1}, honest


def test_the_margin_null_is_the_loosest_worker_population(pool: dict) -> None:
    """Calibration fits each worker dtype's tails on its own and keeps the largest per level: pooled with float32
    workers (margins 0), the bf16 workers' flip rate would be halved and honest bf16 workers would outgrow it."""
    from validator.calibrate import margin_null, measure

    lab, eps = pool["lab"], pool["bf16"].verification.logit_tolerance
    samples = measure(lab.folder, lab.spec, ["float32", "bfloat16"], [1], 24, "torch", "cpu").samples
    bf16_only = margin_null(lab.folder, lab.spec, [s for s in samples if s[3] == "bfloat16"], eps, 128)
    both = margin_null(lab.folder, lab.spec, samples, eps, 128)
    assert bf16_only.tail[0] > 2 * 9 / bf16_only.tokens  # the bf16 workers flip near-ties: a real rate, not a bound
    assert all(b >= a for a, b in zip(bf16_only.tail, both.tail)), (bf16_only.tail, both.tail)
    assert both.tokens == bf16_only.tokens
