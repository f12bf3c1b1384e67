"""Tolerances that follow the policy (docs/protocol.md, "Thresholds that follow the policy"): a manifest may carry
tolerances recalibrated on its policy; validators judge its files by the looser of them and the run spec's, so a
policy can loosen a pool's rules and never tighten them; the trainer's file of them is refused with one line when it
is malformed, measured at other levels, or would make a top-p pool's nucleus check loose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.manifest import PolicyVerification, parse_manifest
from proofs.toploc_thresholds import ChunkLimits
from protocol.runspec import (
    RunSpec,
    RunSpecFileError,
    SamplingSpec,
    VerificationSpec,
    load_policy_verification,
    looser_chunk_limits,
)

LEVELS = list(VerificationSpec().margin_levels)
SPEC = RunSpec(task={"name": "sort", "seed": 0}, pool_seed="0x" + "11" * 32,
               verification=VerificationSpec(logit_tolerance=0.02, margin_tail=[1e-3, 1e-3, 5e-4, 1e-4, 1e-5, 1e-5],
                                             margin_tokens=10**6))


def policy(tolerance: float, tail: list[float], levels: list[float] = LEVELS, tokens: int = 5000,
           **toploc) -> PolicyVerification:
    """Recalibrated tolerances; TOPLOC's the run spec's own unless given."""
    v = SPEC.verification
    fields = {"toploc_min_exp_matches": v.toploc_min_exp_matches, "toploc_max_mant_err_mean": v.toploc_max_mant_err_mean,
              "toploc_max_mant_err_median": v.toploc_max_mant_err_median,
              "toploc_mean_excludes_max": v.toploc_mean_excludes_max, "toploc_by_tokens": v.toploc_by_tokens}
    return PolicyVerification(logit_tolerance=tolerance, margin_levels=levels, margin_tail=tail, margin_tokens=tokens,
                              **(fields | toploc))


def test_a_policy_loosens_the_run_spec_level_by_level_and_never_tightens_it() -> None:
    rules = SPEC.verification_for(policy(0.15, [2e-3, 1e-3, 1e-4, 1e-4, 5e-5, 1e-6]))
    assert rules.logit_tolerance == 0.15
    assert rules.margin_tail == [2e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-5]
    assert rules.margin_tokens == 5000  # the evidence behind the looser tails is the smaller count
    tighter = SPEC.verification_for(policy(0.001, [1e-6] * 6))
    assert tighter.logit_tolerance == 0.02 and tighter.margin_tail == SPEC.verification.margin_tail
    assert SPEC.verification_for(None) == SPEC.verification
    # tails at other levels do not compare: only the tolerance is taken
    other = SPEC.verification_for(policy(0.1, [0.5] * 3, levels=[0.0, 0.1, 0.2]))
    assert other.logit_tolerance == 0.1 and other.margin_tail == SPEC.verification.margin_tail
    assert rules.margin_null().log_p_value(3.0, [1024]) >= SPEC.verification.margin_null().log_p_value(3.0, [1024])


def test_a_policy_cannot_loosen_a_top_p_pool_past_its_nucleus_limit(tmp_path: Path) -> None:
    top_p = RunSpec(task=SPEC.task, pool_seed=SPEC.pool_seed, sampling=SamplingSpec(top_p=0.9),
                    verification=SPEC.verification.model_copy(update={"logit_tolerance": 0.004}))
    assert top_p.nucleus_problem(0.004) is None and top_p.nucleus_problem(0.02) is not None
    loose = policy(0.02, [1e-2] * 6)
    assert top_p.verification_for(loose) == top_p.verification  # ignored as a whole, deterministically
    path = tmp_path / "loose.toml"
    path.write_text(_table(loose))
    with pytest.raises(RunSpecFileError, match="nucleus check loose"):
        load_policy_verification(path, top_p)
    assert load_policy_verification(path, SPEC) == loose  # top_p = 1: no nucleus to loosen


def _table(p: PolicyVerification, drop: str | None = None) -> str:
    rows = {k: v for k, v in p.model_dump().items() if k != drop}
    return "# validator calibrate\n[verification]\nmin_eos_prob = 0.0\n" + "".join(
        f"{k} = {json.dumps(v)}\n" for k, v in rows.items())


@pytest.mark.parametrize("text, message", [
    (None, "does not exist"),
    ("[[[", "not readable TOML"),
    ("logit_tolerance = 0.1\n", "no \\[verification\\] table"),
    (_table(policy(0.1, [1e-3] * 6), drop="margin_tail"), "lacks margin_tail"),
    (_table(policy(0.1, [1e-3] * 6)).replace("logit_tolerance = 0.1", "logit_tolerance = -1"), "logit_tolerance"),
    (_table(policy(0.1, [1e-3] * 6)).replace("[0.001, 0.001, 0.001", "[0.001, 0.001, 0.5"), "do not increase"),
    (_table(policy(0.1, [1e-3] * 3, levels=[0.0, 0.1, 0.2])), "at levels"),
])
def test_a_bad_policy_verification_file_is_refused_in_one_line(text: str | None, message: str, tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(RunSpecFileError, match=message) as caught:
        load_policy_verification(path, SPEC)
    assert "\n" not in str(caught.value)


def test_a_manifest_without_tolerances_keeps_its_bytes_and_one_with_them_round_trips() -> None:
    base = {"schema_version": 1, "step": 1, "parent": None, "config": None, "tokenizer_files": [], "dtype": "float32",
            "aliases": {}, "shards": [{"name": "model-00001-of-00001.safetensors", "tensors": ["w"], "size": 4,
                                       "sha256": "0" * 64,
                                       "cid": "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"}]}
    plain = parse_manifest(json.dumps(base).encode())
    assert b"verification" not in plain.to_bytes()
    carried = plain.model_copy(update={"verification": policy(0.1, [1e-3] * 6)})
    assert parse_manifest(carried.to_bytes()) == carried


def limits(tokens: int, mismatches: int, mean: float, median: float = 0.5, exceed: float | None = None,
           rate: float = 1.0) -> ChunkLimits:
    return ChunkLimits(tokens=tokens, max_exp_mismatches=mismatches, max_mant_err_mean=mean, max_mant_err_median=median,
                       chunks=100, exceed_mean=exceed, exceed_rate=rate)


def test_toploc_limits_from_a_policy_are_looser_than_both_at_every_chunk_length() -> None:
    spec = [limits(2, 10, 0.5, exceed=0.3, rate=0.1), limits(32, 4, 0.2, exceed=0.1, rate=0.1)]
    carried = [limits(8, 6, 0.9, exceed=0.2, rate=0.2), limits(16, 2, 0.1), limits(64, 9, 9.0)]
    merged = looser_chunk_limits(spec, carried)
    assert [e.tokens for e in merged] == [2, 8, 16, 32]  # nothing past the run spec's last entry (32)

    def judge(entries, t):
        return next(e for e in entries if e.tokens >= t)

    for t in range(1, 33):
        m, a, b = judge(merged, t), judge(spec, t), judge(carried, t)
        assert m.max_exp_mismatches >= max(a.max_exp_mismatches, b.max_exp_mismatches)
        assert m.max_mant_err_mean >= max(a.max_mant_err_mean, b.max_mant_err_mean)
        assert m.max_mant_err_median >= max(a.max_mant_err_median, b.max_mant_err_median)
    assert judge(merged, 12).exceed_mean is None  # the policy does not count 9-16-token chunks: neither does the merge
    assert (judge(merged, 1).exceed_mean, judge(merged, 1).exceed_rate) == (0.3, 0.2)
    assert looser_chunk_limits([], carried) == []  # a run spec judged by scalar limits keeps them
    rules = SPEC.verification.model_copy(update={"toploc_by_tokens": spec}).for_policy(
        policy(0.02, [1e-3] * 6, toploc_min_exp_matches=100, toploc_max_mant_err_mean=0.5, toploc_by_tokens=carried,
               toploc_mean_excludes_max=True))
    assert (rules.toploc_min_exp_matches, rules.toploc_max_mant_err_mean, rules.toploc_mean_excludes_max) == (90, 10.0, True)
    assert rules.toploc_by_tokens == merged
