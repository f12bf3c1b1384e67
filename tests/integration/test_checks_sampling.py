"""Seed derivation, Gumbel-max sampling and its replay rule; termination; assignment."""

from __future__ import annotations

import math

import pytest
import torch

from proofs.assignment import AssignmentError, assign_prompts, check_assignment
from proofs.sampling import (
    SamplingSpecError,
    derive_seed,
    nucleus_mask,
    replay,
    sample_token,
    sample_tokens,
)
from proofs.termination import check_termination

POOL = b"pool-seed-0001"
ALICE = "0x" + "ab" * 20
BOB = "0x" + "cd" * 20


# ---- seeds ----------------------------------------------------------------------------------


def test_seed_depends_on_every_input_and_is_63_bits() -> None:
    pin, other_pin = b"\x01" * 32, b"\x02" * 32
    base = derive_seed(POOL, ALICE, pin, 0)
    assert base == derive_seed(POOL, ALICE.upper().replace("0X", "0x"), pin, 0)
    variants = {
        derive_seed(b"other pool", ALICE, pin, 0), derive_seed(POOL, BOB, pin, 0),
        derive_seed(POOL, ALICE, other_pin, 0), derive_seed(POOL, ALICE, pin, 1),
    }
    assert base not in variants and len(variants) == 4
    assert all(0 <= s < 2**63 for s in variants | {base})


@pytest.mark.parametrize("worker", ["ab" * 20, "0x1234", "0x" + "zz" * 20, ""])
def test_malformed_worker_address_is_refused(worker: str) -> None:
    with pytest.raises(SamplingSpecError):
        derive_seed(POOL, worker, bytes(32), 0)


def test_seed_block_hash_must_be_32_bytes() -> None:
    with pytest.raises(SamplingSpecError, match="32 bytes"):
        derive_seed(POOL, ALICE, b"\x01" * 31, 0)


# ---- sampling -------------------------------------------------------------------------------


def test_gumbel_max_samples_the_softmax_distribution() -> None:
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    expected = torch.softmax(logits / 0.7, -1)
    draws = 6000
    chosen = sample_tokens(logits.expand(draws, 5), torch.full((draws,), 12345), torch.arange(draws), 0.7, 1.0)
    counts = torch.bincount(chosen, minlength=5).float()
    chi2 = float((((counts - draws * expected) ** 2) / (draws * expected)).sum())
    assert chi2 < 20.5  # p < 0.0004 for 4 degrees of freedom


def test_nucleus_is_the_smallest_prefix_reaching_top_p() -> None:
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert nucleus_mask(logits, 1.0, 0.5).tolist() == [True, False, False, False]
    assert nucleus_mask(logits, 1.0, 0.7).tolist() == [True, True, False, False]
    assert nucleus_mask(logits, 1.0, 1.0).all()


def _sample_sequence(
    logits: torch.Tensor, seed: int, temperature: float, top_p: float
) -> list[int]:
    return [sample_token(row, seed, position, temperature, top_p) for position, row in enumerate(logits)]


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (1.3, 0.5), (0.0, 1.0)])
def test_replay_accepts_honest_tokens_under_noise_up_to_the_tolerance(
    temperature: float, top_p: float
) -> None:
    """The rule's guarantee: logits off by at most eps everywhere never fail an honest token."""
    gen = torch.Generator().manual_seed(0)
    eps = 0.05
    for trial in range(20):
        logits = 3 * torch.randn(64, 50, generator=gen)
        tokens = _sample_sequence(logits, trial, temperature, top_p)
        noisy = logits + eps * (2 * torch.rand(logits.shape, generator=gen) - 1)
        result = replay(noisy, tokens, trial, temperature, top_p, eps)
        assert result.passed, result


def test_replay_rejects_other_tokens_other_seeds_and_other_temperatures() -> None:
    gen = torch.Generator().manual_seed(1)
    logits = 3 * torch.randn(64, 50, generator=gen)
    tokens = _sample_sequence(logits, 9, 1.0, 1.0)
    assert replay(logits, tokens, 9, 1.0, 1.0, 1e-3).passed
    altered = list(tokens)
    altered[10] = (altered[10] + 1) % 50
    assert replay(logits, altered, 9, 1.0, 1.0, 1e-3).failed_positions == [10]
    assert not replay(logits, tokens, 10, 1.0, 1.0, 1e-3).passed
    assert not replay(logits, _sample_sequence(logits, 9, 0.6, 1.0), 9, 1.0, 1.0, 1e-3).passed
    assert not replay(logits, _sample_sequence(logits, 9, 0.0, 1.0), 9, 1.0, 1.0, 1e-3).passed
    outside = replay(logits, [60] * 64, 9, 1.0, 1.0, 1e-3)
    assert len(outside.failed_positions) == 64 and math.isinf(outside.max_score_gap)


def test_replay_rejects_tokens_outside_the_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    assert replay(logits, [2], 0, 1.0, 0.5, 1e-3).failed_positions == [0]


def test_replay_measured_false_positive_rate_is_zero_within_and_grows_beyond_tolerance() -> None:
    """Noise within eps: 0 failures (the guarantee). Noise 20x larger than eps (a pool that
    under-estimates its hardware noise): some honest tokens fail, which is why eps must be
    set from measured noise."""
    gen = torch.Generator().manual_seed(2)
    logits = 2 * torch.randn(2000, 40, generator=gen)
    tokens = _sample_sequence(logits, 3, 1.0, 0.95)
    within = logits + 1e-3 * (2 * torch.rand(logits.shape, generator=gen) - 1)
    beyond = logits + 2e-2 * (2 * torch.rand(logits.shape, generator=gen) - 1)
    assert replay(within, tokens, 3, 1.0, 0.95, 1e-3).passed
    assert 0 < len(replay(beyond, tokens, 3, 1.0, 0.95, 1e-3).failed_positions) < 200


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_replay_gives_the_same_bits_whatever_its_block_size(temperature: float, top_p: float) -> None:
    """Replay works on blocks of positions to bound its memory; each row is replayed on its own, so
    the verdict and the evidence (failed positions, max score gap) do not depend on the block."""
    gen = torch.Generator().manual_seed(4)
    logits = 3 * torch.randn(70, 50, generator=gen)
    tokens = _sample_sequence(logits, 5, temperature, top_p)
    tokens[3] = (tokens[3] + 1) % 50  # one failing position, so the evidence is not trivial
    noisy = logits + 1e-3 * (2 * torch.rand(logits.shape, generator=gen) - 1)
    results = [replay(noisy, tokens, 5, temperature, top_p, 1e-3, block_rows=rows) for rows in (1, 7, 64, 70, None)]
    assert 3 in results[0].failed_positions
    assert all(r == results[0] for r in results)


def test_replay_refuses_mismatched_shapes() -> None:
    with pytest.raises(SamplingSpecError):
        replay(torch.zeros(3, 5), [1, 2], 0, 1.0, 1.0, 0.0)


# ---- termination ----------------------------------------------------------------------------

EOS = 2


def _eos_logits(p_eos: float) -> torch.Tensor:
    probs = torch.full((5,), (1 - p_eos) / 4)
    probs[EOS] = p_eos
    return probs.log()


def test_termination_rules() -> None:
    ok = check_termination([5, 6, EOS], "eos", 8, EOS, _eos_logits(0.2))
    assert ok.passed and ok.eos_prob == pytest.approx(0.2, rel=1e-4)
    assert check_termination([5, 6, 7, 8], "length", 4, EOS).passed
    assert not check_termination([5, 6], "length", 4, EOS).passed  # cut short without EOS
    assert not check_termination([5, EOS, 6, EOS], "eos", 8, EOS, _eos_logits(0.2)).passed
    assert not check_termination([5, 6, 7], "eos", 8, EOS, _eos_logits(0.2)).passed
    # the p(EOS) floor is off unless the pool sets one: an honest draw may have a small p(EOS)
    assert check_termination([5, 6, EOS], "eos", 8, EOS, _eos_logits(1e-9)).passed
    assert not check_termination([5, 6, EOS], "eos", 8, EOS, _eos_logits(1e-9), min_eos_prob=1e-6).passed
    assert not check_termination([5, 6, 7, EOS], "length", 4, EOS).passed
    assert not check_termination([5] * 9, "length", 8, EOS).passed
    assert not check_termination([], "eos", 8, EOS).passed
    assert not check_termination([5], "stop", 8, EOS).passed


# ---- assignment -----------------------------------------------------------------------------


def test_assignment_is_deterministic_distinct_and_keyed() -> None:
    a = assign_prompts(POOL, ALICE, 0, 1000, 16)
    assert a == assign_prompts(POOL, ALICE, 0, 1000, 16)
    assert len(set(a)) == 16 and all(0 <= i < 1000 for i in a)
    assert a[:4] == assign_prompts(POOL, ALICE, 0, 1000, 4)
    others = [
        assign_prompts(POOL, BOB, 0, 1000, 16), assign_prompts(POOL, ALICE, 1, 1000, 16),
        assign_prompts(b"x", ALICE, 0, 1000, 16),
    ]
    assert all(o != a for o in others)
    assert sorted(assign_prompts(POOL, ALICE, 0, 7, 7)) == list(range(7))


def test_assignment_is_close_to_uniform() -> None:
    counts = [0] * 10
    for nonce in range(2000):
        counts[assign_prompts(POOL, ALICE, nonce, 10, 1)[0]] += 1
    assert min(counts) > 140 and max(counts) < 260


def test_assignment_check_and_errors() -> None:
    a = assign_prompts(POOL, ALICE, 0, 100, 8)
    assert check_assignment(a, POOL, ALICE, 0, 100)
    assert not check_assignment(list(reversed(a)), POOL, ALICE, 0, 100)
    assert not check_assignment(a, POOL, BOB, 0, 100)
    assert not check_assignment(a, POOL, ALICE, 1, 100)
    assert not check_assignment(list(range(101)), POOL, ALICE, 0, 100)
    with pytest.raises(AssignmentError):
        assign_prompts(POOL, ALICE, 0, 10, 11)
    with pytest.raises(AssignmentError):
        assign_prompts(POOL, ALICE, -1, 10, 1)
    with pytest.raises(AssignmentError):
        assign_prompts(POOL, ALICE, 2**64, 10, 1)


def test_a_run_spec_whose_tolerance_makes_the_nucleus_check_loose_is_refused() -> None:
    """top_p < 1 at a bf16-calibrated tolerance: the relaxed nucleus would admit tokens an honest top-p sampler
    never draws (issue 26); the float32 profile keeps top_p < 1 usable."""
    from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
    from tasks.registry import TaskSpec

    def spec(top_p: float, tolerance: float, temperature: float = 1.0) -> RunSpec:
        return RunSpec(task=TaskSpec(name="sort"), pool_seed="0x" + "ab" * 32,
                       sampling=SamplingSpec(temperature=temperature, top_p=top_p),
                       verification=VerificationSpec(logit_tolerance=tolerance))

    assert spec(0.95, 1e-3).sampling.top_p == 0.95
    assert spec(1.0, 0.03).verification.logit_tolerance == 0.03
    with pytest.raises(ValueError, match="nucleus check loose.*at most 0.00"):
        spec(0.95, 0.03)
    with pytest.raises(ValueError, match="nucleus check loose"):
        spec(0.99, 1e-3, temperature=0.5)
