"""The spot-check draw (protocol.spotcheck): deterministic, without replacement, uniform; and the
incentive bound that `pool create` and ComputePool.createPool share."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from eth_utils import keccak

from ledger_client.chain import errors
from protocol.spotcheck import (
    detection_probability,
    min_slash,
    spot_check_count,
    spot_check_indices,
    spot_check_randomness,
)


def _randomness(i: int) -> bytes:
    return spot_check_randomness(keccak(b"block" + i.to_bytes(8, "big")), keccak(b"work"))


def test_count_is_the_ceiling_of_q_n():
    assert [spot_check_count(n, 500) for n in (1, 16, 20, 21, 128)] == [1, 1, 1, 2, 7]
    assert spot_check_count(128, 10_000) == 128 and spot_check_count(0, 500) == 0
    for bad in (0, 10_001, -1):
        with pytest.raises(ValueError):
            spot_check_count(8, bad)


def test_randomness_is_keccak_of_block_hash_then_work_id():
    block_hash, work_id = b"\x01" * 32, b"\x02" * 32
    assert spot_check_randomness(block_hash, work_id) == keccak(block_hash + work_id)
    with pytest.raises(ValueError):
        spot_check_randomness(b"\x01" * 31, work_id)


def test_indices_are_deterministic_distinct_sorted_and_in_range():
    r = _randomness(0)
    first = spot_check_indices(r, 128, 500)
    assert first == spot_check_indices(r, 128, 500)
    assert len(first) == 7 == len(set(first)) and first == sorted(first) and all(0 <= i < 128 for i in first)
    assert spot_check_indices(_randomness(1), 128, 500) != first  # another block hash, another draw
    assert spot_check_indices(None, 5, 10_000) == [0, 1, 2, 3, 4]  # q = 1 needs no randomness
    with pytest.raises(ValueError):
        spot_check_indices(None, 128, 500)


def test_draw_is_uniform_over_positions_and_subsets():
    """Every index is chosen with probability m/n, and every m-subset of n with probability 1/C(n, m)
    (chi-square against uniform, far from the 0.1 % critical values)."""
    n, m, trials = 6, 2, 6000
    bps = m * 10_000 // n  # ceil(6 × 3333 / 10000) = 2
    assert spot_check_count(n, bps) == m
    subsets = Counter(tuple(spot_check_indices(_randomness(i), n, bps)) for i in range(trials))
    assert set(subsets) == set(itertools.combinations(range(n), m))
    expected = trials / len(subsets)
    chi2 = sum((c - expected) ** 2 / expected for c in subsets.values())
    assert chi2 < 36.1  # 14 degrees of freedom, p = 0.001
    positions = Counter(i for s, c in subsets.items() for i in s for _ in range(c))
    expected = trials * m / n
    assert sum((c - expected) ** 2 / expected for c in positions.values()) < 20.5  # 5 dof, p = 0.001


def test_detection_probability_is_hypergeometric():
    assert detection_probability(128, 7, 1) == pytest.approx(7 / 128)
    assert detection_probability(10, 3, 2) == pytest.approx(1 - (8 * 7 * 6) / (10 * 9 * 8))
    assert detection_probability(128, 7, 128) == 1.0 and detection_probability(128, 7, 0) == 0.0


def test_min_slash_is_the_break_even_of_q_s_against_one_minus_q_r():
    assert min_slash(500, 10, 128) == 19 * 10 * 128
    assert min_slash(10_000, 10**18, 128) == 1
    assert min_slash(300, 1, 7) == -(-9_700 * 7 // 300)


def test_contract_refuses_exactly_below_the_python_min_slash(chain):
    """ComputePool.createPool and protocol.spotcheck.min_slash agree on the bound."""
    p = chain.owner.pool.get_pool(chain.pool_id).params._replace(validators=[chain.accounts[3].address],
                                                                   spot_check_bps=500)
    least = min_slash(500, p.reward_per_sample, p.max_samples_per_work)
    with pytest.raises(errors.SlashBelowSpotCheckBound) as refused:
        chain.owner.pool.create_pool(p._replace(slash_amount=least - 1))
    assert list(refused.value.args_dict.values()) == [least - 1, least]
    chain.owner.pool.create_pool(p._replace(slash_amount=least))
    created = chain.owner.pool.get_pool(chain.owner.pool.pool_count()).params
    assert (created.spot_check_bps, created.slash_amount) == (500, least)
