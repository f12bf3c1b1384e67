"""The floor of checked tokens a file (docs/protocol.md R8.6): the spot check draws past ⌈q·n⌉, in its own shuffle
order, until the drawn completions hold the run spec's `min_checked_tokens`; validators, the evidence and the explorer
re-derive the same draw, and `pool create` refuses a floor no file can hold or one short of the run spec's
`min_power` against the 1.9ε bias."""

from __future__ import annotations

import random
import tomllib

import pytest
from eth_utils import keccak

from dashboard.evidence import checks_passed, verify_draw
from deploy.pools import PoolConfig, UsageError, check_checked_token_floor, spot_check_terms
from protocol.runspec import RunSpec
from protocol.spotcheck import spot_check_count, spot_check_indices, spot_check_randomness
from tests.support.paths import ROOT
from validator.checks import spot_check_of
from validator.outcome import Submission

WORK_ID = keccak(b"work")
BLOCK_HASH = keccak(b"block B + 1")
RANDOMNESS = spot_check_randomness(BLOCK_HASH, WORK_ID)


def shuffle_order(randomness: bytes, n: int) -> list[int]:
    """R8.2's Fisher–Yates order of all n completions, written again from the rule: the floor takes its prefix."""
    order, counter = list(range(n)), 0
    for i in range(n):
        bound = n - i
        limit = 2**256 - 2**256 % bound
        while True:
            word = int.from_bytes(keccak(randomness + counter.to_bytes(8, "big")), "big")
            counter += 1
            if word < limit:
                break
        j = i + word % bound
        order[i], order[j] = order[j], order[i]
    return order


@pytest.mark.parametrize("seed", range(20))
def test_the_floor_takes_the_shortest_prefix_of_the_draw_that_holds_it(seed):
    rng = random.Random(seed)
    n, bps = rng.randint(2, 96), rng.choice([100, 500, 2500])
    lengths = [rng.randint(1, 64) for _ in range(n)]
    floor = rng.randint(1, sum(lengths) - 1)
    order = shuffle_order(RANDOMNESS, n)
    m = spot_check_count(n, bps)
    drawn = m
    while sum(lengths[i] for i in order[:drawn]) < floor:
        drawn += 1
    assert spot_check_indices(RANDOMNESS, n, bps, lengths, floor) == sorted(order[:drawn])
    assert spot_check_indices(RANDOMNESS, n, bps) == sorted(order[:m])  # no floor: the first m, as before


def test_a_floor_never_drops_a_completion_the_draw_without_it_checks():
    rng = random.Random(7)
    lengths = [rng.randint(1, 40) for _ in range(128)]
    base = set(spot_check_indices(RANDOMNESS, 128, 500))
    previous = base
    for floor in range(0, sum(lengths), 97):
        chosen = set(spot_check_indices(RANDOMNESS, 128, 500, lengths, floor))
        assert previous <= chosen and base <= chosen
        assert sum(lengths[i] for i in chosen) >= floor
        previous = chosen


def test_a_file_holding_no_more_than_the_floor_is_checked_whole_without_randomness():
    lengths = [16] * 8
    assert spot_check_indices(None, 8, 500, lengths, 128) == list(range(8))
    assert spot_check_indices(None, 8, 500, lengths, 1_000) == list(range(8))
    with pytest.raises(ValueError, match="randomness"):
        spot_check_indices(None, 8, 500, lengths, 127)


def test_a_floor_without_every_completion_length_is_refused():
    with pytest.raises(ValueError, match="token count"):
        spot_check_indices(RANDOMNESS, 8, 500, None, 10)
    with pytest.raises(ValueError, match="token count"):
        spot_check_indices(RANDOMNESS, 8, 500, [1] * 7, 10)
    with pytest.raises(ValueError, match=">= 0"):
        spot_check_indices(RANDOMNESS, 8, 500, [1] * 8, -1)


def _submission() -> Submission:
    return Submission(work_id=WORK_ID, pool_id=1, worker="0x" + "11" * 20, step=0, n_samples=64, nonce=0,
                      rollout_digest=b"\0" * 32, spot_block=41, spot_block_hash=BLOCK_HASH)


def test_the_validators_draw_carries_the_floor_and_the_explorer_verifies_it():
    lengths = [random.Random(3).randint(1, 32) for _ in range(64)]
    spot = spot_check_of(_submission(), 64, 500, lengths, 600)
    assert spot["m"] == len(spot["indices"]) > spot_check_count(64, 500)
    assert sum(lengths[i] for i in spot["indices"]) >= 600
    assert spot["min_checked_tokens"] == 600 and spot["completion_tokens"] == lengths
    draw = verify_draw(spot, "0x" + WORK_ID.hex())
    assert draw.verified is True and draw.min_checked_tokens == 600 and draw.m == spot["m"]
    # evidence that drops the floor, or misstates the lengths so the draw would have stopped earlier, fails
    assert verify_draw(spot | {"min_checked_tokens": 0}, "0x" + WORK_ID.hex()).verified is False
    assert verify_draw(spot | {"completion_tokens": [32] * 64}, "0x" + WORK_ID.hex()).verified is False
    assert verify_draw(spot | {"completion_tokens": lengths[:-1]}, "0x" + WORK_ID.hex()).verified is False
    no_floor = spot_check_of(_submission(), 64, 500, lengths)
    assert "min_checked_tokens" not in no_floor and no_floor["m"] == spot_check_count(64, 500)


def test_the_explorer_lists_an_attested_files_checks_only_where_no_floor_extends_them():
    block_hash = "0x" + BLOCK_HASH.hex()
    plain = checks_passed(64, 500, "0x" + WORK_ID.hex(), block_hash, 41)
    assert plain.indices == spot_check_indices(RANDOMNESS, 64, 500) and plain.min_checked_tokens == 0
    floored = checks_passed(64, 500, "0x" + WORK_ID.hex(), block_hash, 41, min_checked_tokens=600)
    assert floored.indices is None and floored.randomness == plain.randomness and floored.min_checked_tokens == 600


def _pool_config() -> PoolConfig:
    pool = tomllib.loads((ROOT / "examples" / "pool.toml").read_text())["pool"]
    return PoolConfig.model_validate(pool | {"task": "0x" + "ab" * 32, "base_checkpoint": "0x" + "cd" * 32,
                                             "max_samples_per_work": 128})


def test_pool_create_refuses_a_floor_no_file_can_hold():
    spec = RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run.toml").read_text()))
    cfg = _pool_config()
    most = 128 * spec.sampling.max_tokens
    fits = spec.model_copy(update={"verification": spec.verification.model_copy(update={"min_checked_tokens": most})})
    check_checked_token_floor(cfg, fits)
    check_checked_token_floor(cfg, spec)  # no floor
    over = spec.model_copy(update={"verification": spec.verification.model_copy(
        update={"min_checked_tokens": most + 1})})
    with pytest.raises(UsageError, match=f"min_checked_tokens {most + 1} is more than a file can hold"):
        check_checked_token_floor(cfg, over)


def test_a_hostile_draw_in_evidence_costs_the_explorer_no_more_than_the_document():
    """An evidence document claiming 10^12 completions (and the right randomness) is not verified: drawing it would
    take memory and keccaks the document did not pay for."""
    spot = spot_check_of(_submission(), 64, 500)
    for n, bps in ((10**12, 500), (10**12, 1), (10**8, 9_999)):
        draw = verify_draw(spot | {"n": n, "spot_check_bps": bps}, "0x" + WORK_ID.hex())
        assert draw.verified is False and draw.n == n
    assert verify_draw(spot, "0x" + WORK_ID.hex()).verified is True


def _bf16_spec(**verification) -> RunSpec:
    """examples/run-attacks.toml at bench.attacks' bf16 profile (its tolerance and tails, docs/notes/attacks.md)."""
    spec = RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run-attacks.toml").read_text()))
    return spec.model_copy(update={"verification": spec.verification.model_copy(update={
        "logit_tolerance": 0.0203, "margin_tail": [1.60e-3, 1.52e-3, 1.28e-3, 5.50e-4, 1.75e-5, 1.75e-5],
        "margin_tokens": 536_320, **verification})})


def test_pool_create_refuses_a_floor_short_of_the_stated_power_and_names_the_floor_that_reaches_it():
    """At the bf16 profile, under the spread (a multiplier per prompt, its 16 × 16 = 256 tokens), 99 % of files with
    the 1.9ε bias need ~4,650 checked tokens (proofs.margin_power; ~2,750 if tokens were i.i.d.): a floor of 2,000 is
    refused with the power it reaches and the floor needed; that floor passes and pool create's terms carry its
    power."""
    cfg = _pool_config()  # 128 completions × 16 tokens: at most 2,048 tokens a file
    large = cfg.model_copy(update={"max_samples_per_work": 512})
    short = _bf16_spec(min_checked_tokens=2_000, min_power=0.99)
    with pytest.raises(UsageError) as refused:
        check_checked_token_floor(large, short)
    message = str(refused.value)
    assert "\n" not in message and "min_checked_tokens 2000" in message
    assert "below verification.min_power 0.99" in message
    needed = int(message.rsplit("a floor of ", 1)[1].split()[0])
    assert 4_500 <= needed <= 4_800 and f"power of {short.bias_power(2_000):.4f}" in message
    enough = _bf16_spec(min_checked_tokens=needed, min_power=0.99)
    check_checked_token_floor(large, enough)
    terms = spot_check_terms(large, enough)
    assert terms["min_checked_tokens"] == needed and terms["min_power"] == 0.99 and terms["bias_power_at_floor"] >= 0.99
    with pytest.raises(UsageError, match="no floor a file can hold reaches it .* = 2048 tokens"):
        check_checked_token_floor(cfg, _bf16_spec(min_checked_tokens=2_000, min_power=0.99))


def test_every_shipped_run_spec_passes_pool_creates_floor_checks():
    cfg = _pool_config()
    for path in sorted((ROOT / "examples").glob("run*.toml")):
        spec = RunSpec.model_validate(tomllib.loads(path.read_text()))
        check_checked_token_floor(cfg, spec)
        terms = spot_check_terms(cfg, spec)
        assert ("bias_power_at_floor" in terms) == bool(spec.verification.min_checked_tokens or
                                                        spec.verification.min_power), path.name
