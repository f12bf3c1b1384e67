"""The statistical test of the sampler (proofs.margins): its bounds hold, honest bf16 files pass it, a
systematically different sampler that the per-token bound lets through does not, and the per-worker book
(validator.worker_margins) counts each file once across restarts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import inference.torch_backend as torch_backend
from examples.hf_models import qwen2_style
from inference.policy import load_policy
from inference.torch_backend import NO_EOS, TorchBackend
from inference.verify import CompletionRecord, VerifyConfig, file_margin_test, verify_completions
from proofs.margins import FACTOR_VERSION, MARGIN_LEVELS, MarginNull, log_e_value, margin_test, tail_bound
from proofs.sampling import honest_margins, replay, sample_tokens
from proofs.toploc import build_proofs_batch
from protocol.runspec import SamplingSpec
from validator.worker_margins import NullUse, WorkerMargins

SAMPLING = SamplingSpec(temperature=1.0, max_tokens=32)


def test_tail_bound_holds_at_its_confidence() -> None:
    rng = np.random.default_rng(26)
    rate, trials, confidence = 2e-3, 5000, 0.05
    misses = sum(rate > tail_bound(int(rng.binomial(trials, rate)), trials, confidence) for _ in range(400))
    assert misses <= 400 * confidence
    assert tail_bound(0, 10**6, 1e-3) < 1e-5 < tail_bound(0, 10**5, 1e-3)  # more honest tokens, tighter tails


def test_chernoff_bound_holds_for_an_honest_population_inside_the_tails() -> None:
    """Margins 0 w.p. 1 - 4e-3, else uniform on (0, 0.3): files of 512 tokens exceed the α = 1e-2 threshold
    of the null fitted on their exact tails at most α of the time."""
    rng = np.random.default_rng(7)
    exceed = [round(4e-3 * max(0.0, 1 - level / 0.3) * 10**7) for level in MARGIN_LEVELS]
    null = MarginNull.fit(exceed, 10**7)
    flips = rng.random((20000, 512)) < 4e-3
    sums = (flips * rng.uniform(0, 0.3, flips.shape)).sum(axis=1)
    threshold = null.threshold([512], 1e-2)
    assert 0 < threshold < 512
    assert (sums >= threshold).mean() <= 1e-2
    assert null.log_p_value(float(sums.max()), [512]) > math.log(1e-2) - 1e-9 or (sums >= threshold).any()


def test_rounded_margins_keep_the_bound_and_count_tokens_far_above_the_noise_as_rare_events() -> None:
    """The statistic rounds each margin up to the null's next level (MarginNull.score): the honest population's
    rounded sums still exceed the threshold at most α of the time, and a file with four tokens at m = 0.75 among
    honest ones is caught by the rounded sum (4) where the plain sum (3) passes (tokens i.i.d. from the null, no
    spread: the rounding's own claim; tests/unit/proofs/test_margin_spread.py has the spread)."""
    rng = np.random.default_rng(8)
    exceed = [round(4e-3 * max(0.0, 1 - level / 0.3) * 10**7) for level in MARGIN_LEVELS]
    null = MarginNull.fit(exceed, 10**7)
    flips = rng.random((5000, 512)) < 4e-3
    margins = flips * rng.uniform(0, 0.3, flips.shape)
    rounded = np.array([null.score(row) for row in margins])
    assert (rounded >= margins.sum(axis=1) - 1e-12).all()
    assert (rounded >= null.threshold([512], 1e-2)).mean() <= 1e-2
    calibrated = MarginNull(levels=MARGIN_LEVELS, tail=(9.6e-4, 9.0e-4, 7.9e-4, 4.7e-4, 3.2e-5, 3.2e-5),
                            spread_shape=None, miscalibration=1.0)
    file = [0.0] * 556 + [0.75] * 4
    rate = 1e-6
    assert calibrated.log_p_value(sum(file), [560]) > math.log(rate / 2)  # the plain sum: 3.0, not significant
    assert calibrated.score(file) == 4.0
    assert calibrated.log_p_value(calibrated.score(file), [560]) < math.log(rate / 2)


def test_margins_past_equal_tails_count_as_the_hard_bound_and_the_bound_still_holds() -> None:
    """Levels whose tails are equal carry no mass between them, so a margin past the first of them counts 1
    (MarginNull.points): an honest population that puts exactly the top tail's mass just above 1/4 (the worst case
    for that rounding) still exceeds the threshold at most α of the time, and the rounding counts four tokens at
    m = 0.3 as 4 where the next-level rounding counted 2 and passed (tokens i.i.d. from the null, no spread)."""
    tails = (9.6e-4, 9.0e-4, 7.9e-4, 4.7e-4, 3.2e-5, 3.2e-5)
    null = MarginNull(levels=MARGIN_LEVELS, tail=tails, spread_shape=None, miscalibration=1.0)
    assert null.points() == (1 / 256, 1 / 64, 1 / 16, 1 / 4, 1.0, 1.0)
    rng = np.random.default_rng(11)
    n, rate = 512, 1e-2
    u = rng.random((200_000, n))
    margins = np.where(u < tails[4], 0.26, np.where(u < tails[3], 0.2, np.where(u < tails[0], 0.01, 0.0)))
    rounded = np.array([null.score(row) for row in margins])
    assert (rounded >= null.threshold([n], rate)).mean() <= rate
    file = [0.0] * 556 + [0.3] * 4
    assert null.score(file) == 4.0
    assert null.log_p_value(null.score(file), [560]) < math.log(1e-6 / 2)
    assert null.log_p_value(2.0, [560]) > math.log(1e-6 / 2)  # what 4 × 1/2 gave: not significant
    flat = MarginNull(levels=MARGIN_LEVELS, tail=(1.66e-5,) * 6)  # a pool whose honest margins were all 0
    assert flat.points() == (1.0,) * 6 and flat.score([1e-4, 0.0, 0.3]) == 2.0  # every flip is a rare event


def test_margin_test_names_the_most_deviant_completion() -> None:
    null = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6)
    honest = [(32, 0.0)] * 63
    prompts = [i // 16 for i in range(64)]  # 4 prompts of 16 completions
    test = margin_test([*honest, (32, 6.0)], prompts, null, 1e-6)
    assert not test.passed and test.worst_completion == 63 and test.prompt_tokens == [512] * 4
    assert margin_test([*honest, (32, 0.01)], prompts, null, 1e-6).passed


def test_many_seeds_replay_one_prefill_as_replay_would() -> None:
    """honest_margins gives, per seed, the margins `replay` reports for the tokens the worker's logits sample with
    that seed: one prefill serves every seed."""
    generator = torch.Generator().manual_seed(3)
    reference = torch.randn(12, 300, generator=generator) * 3
    worker = reference + 0.01 * torch.randn(12, 300, generator=generator)
    seeds = torch.tensor([5, 2**40 + 7, 99])
    margins = honest_margins(reference, worker, seeds, 1.0, 1.0, 0.02)
    positions = torch.arange(12)
    for k, seed in enumerate(seeds.tolist()):
        tokens = sample_tokens(worker, torch.full((12,), seed), positions, 1.0, 1.0).tolist()
        assert margins[k].tolist() == pytest.approx(replay(reference, tokens, seed, 1.0, 1.0, 0.02).margins, abs=1e-6)
    assert not honest_margins(reference, reference, seeds, 1.0, 1.0, 0.02).any()  # no noise: the argmax, margin 0


# ---- a real model: an honest bf16 worker against a float32 validator ----------------------------


@pytest.fixture(scope="module")
def bf16_pool(tmp_path_factory) -> dict:
    """A Qwen2-style folder (V = 2048), the validator's float32 backend, the tolerance of the bf16 worker's
    measured logit noise (x2) and a margin null calibrated on 12,288 of its honest tokens."""
    folder = qwen2_style(tmp_path_factory.mktemp("margins") / "qwen2", vocab=2048)
    model, tokenizer = load_policy(folder)
    validator = TorchBackend(model, eos_token_id=NO_EOS, pad_token_id=tokenizer.pad_token_id)
    records = _generate(folder, range(384))
    prefills = validator.prefill_batch([(r.prompt_ids, r.completion_ids) for r in records])
    worker, _ = load_policy(folder)
    own = TorchBackend(worker, compute_dtype=torch.bfloat16, eos_token_id=NO_EOS).prefill_batch(
        [(r.prompt_ids, r.completion_ids) for r in records])
    tolerance = 2 * max(float((a.logits - b.logits.float()).abs().max()) for a, b in zip(prefills, own))
    levels = torch.tensor(MARGIN_LEVELS)
    exceed = torch.zeros(len(levels), dtype=torch.int64)
    for r, p in zip(records, prefills):
        margins = torch.tensor(replay(p.logits, r.completion_ids, r.seed, 1.0, 1.0, tolerance).margins)
        exceed += (margins[:, None] > levels).sum(0)
    null = MarginNull.fit(exceed.tolist(), sum(len(r.completion_ids) for r in records))
    return {"folder": folder, "validator": validator,
            "config": VerifyConfig(sampling=SAMPLING, logit_tolerance=tolerance, margin_null=null)}


def _generate(folder: Path, indices, scale: float = 1.0) -> list[CompletionRecord]:
    """bf16 completions of prompts `indices`; `scale` multiplies the logits the worker samples from (a colder
    sampler for scale > 1)."""
    model, tokenizer = load_policy(folder)
    worker = TorchBackend(model, compute_dtype=torch.bfloat16, eos_token_id=NO_EOS, pad_token_id=tokenizer.pad_token_id)
    prompts = [[5 + i % 50, 7, 9 + i % 7] for i in indices]
    seeds = [10_000 + i for i in indices]
    honest_rule = torch_backend.sample_tokens
    if scale != 1.0:
        torch_backend.sample_tokens = lambda logits, *a, **k: honest_rule(logits * scale, *a, **k)
    try:
        completions = worker.generate(prompts, SAMPLING, seeds)
    finally:
        torch_backend.sample_tokens = honest_rule
    proofs = build_proofs_batch([c.hidden for c in completions], chunk=32)
    return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=q, seed=s, finish_reason="length")
            for p, c, q, s in zip(prompts, completions, proofs, seeds)]


def test_honest_bf16_files_pass_and_a_colder_sampler_is_caught(bf16_pool: dict, tmp_path: Path) -> None:
    """Honest bf16 files pass both tests and leave the worker's record far from a challenge; files of a sampler
    at T x 0.9 are each challenged, by the per-token bound or by the margin test, their margins ≥ 50x honest."""
    config, validator = bf16_pool["config"], bf16_pool["validator"]
    book = WorkerMargins(tmp_path / "book.json")
    scores = {"honest": 0.0, "colder": 0.0}
    for f in range(2):
        indices = range(1000 + 64 * f, 1064 + 64 * f)
        for name, scale in (("honest", 1.0), ("colder", 1 / 0.9)):
            records = _generate(bf16_pool["folder"], indices, scale)
            verdicts = verify_completions(validator, records, config)
            test = file_margin_test(verdicts, [tuple(r.prompt_ids) for r in records], config)
            scores[name] += test.score
            if name == "honest":
                assert all(v.passed for v in verdicts) and test.passed and test.log_p_value > -1
                assert book.judge("0x" + "ab" * 20, f"0x{f:064x}", test.prompt_tokens, test.score, config.margin_null,
                                  1e-6) is None
            else:
                assert not test.passed or not all(v.passed for v in verdicts)
    assert scores["colder"] > 50 * max(scores["honest"], 0.01)


def test_worker_book_counts_each_file_once_across_restarts(tmp_path: Path) -> None:
    null = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6)
    path, worker = tmp_path / "worker_margins.json", "0x" + "ab" * 20
    book = WorkerMargins(path)
    assert book.judge(worker, "0x01", [2048], 1.0, null, 1e-6) is None
    again = WorkerMargins(path)  # a restart: the file judged again adds nothing
    assert again.judge(worker, "0x01", [2048], 1.0, null, 1e-6) is None
    assert again.workers[worker]["open"] == {"0x01": [2048, 1.0, null.worker_log_terms(1.0, [2048]), [2048]]}
    evidence = None
    for k in range(2, 40):
        evidence = WorkerMargins(path).judge(worker, f"0x{k:02x}", [2048], 1.0, null, 1e-6)
        if evidence is not None:
            break
    assert evidence is not None and evidence["files"] == k and evidence["log_e_value"] >= math.log(1e6)
    after = WorkerMargins(path)
    assert after.judge(worker, f"0x{k:02x}", [2048], 1.0, null, 1e-6) == evidence  # the same verdict after a crash
    assert after.workers[worker]["open"] == {}  # spent evidence does not count again


def test_worker_book_multiplies_each_files_factor_under_its_own_null(tmp_path: Path) -> None:
    """Files of policies with their own tolerances: the worker's e-value is the mean over λ of the product of each
    file's factor under that file's null, not one null applied to the summed scores."""
    early, late = (MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6),
                   MarginNull.fit([200_000, 100_000, 50_000, 20_000, 5_000, 1_000], 10**6))
    worker = "0x" + "cd" * 20
    book = WorkerMargins(tmp_path / "book.json")
    book.judge(worker, "0x01", [2048], 0.5, early, 1e-30)  # a rate that no e-value here reaches
    book.judge(worker, "0x02", [2048], 6.0, late, 1e-30)
    expected = log_e_value([a + b for a, b in zip(early.worker_log_terms(0.5, [2048]), late.worker_log_terms(6.0, [2048]))])
    assert WorkerMargins(tmp_path / "book.json").log_e_value(worker, early) == pytest.approx(expected)
    # judged under the early null alone, 6.0 over 4096 tokens would look far more deviant than it is
    assert expected < 1 < early.worker_log_e_value(6.5, [4096]) - 5
    # a book written before files kept their factors: its files count under the null of the file being judged
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps({worker: {"open": {"0x01": [2048, 0.5]}, "challenged": {}}}))
    assert WorkerMargins(legacy).log_e_value(worker, late) == pytest.approx(late.worker_log_e_value(0.5, [2048]))


def test_the_nulls_mean_and_how_much_of_it_accepted_files_use(caplog: pytest.LogCaptureFixture) -> None:
    """MarginNull.mean is the dominating distribution's mean (a sample of it agrees); NullUse divides accepted
    files' rounded margins per token by it, each file under its own null; the validator warns once when it is
    outgrown."""
    null = MarginNull(levels=MARGIN_LEVELS, tail=(4e-3, 3e-3, 2e-3, 1e-3, 5e-4, 1e-4))
    rng = np.random.default_rng(9)
    points = np.array([0.0, *MARGIN_LEVELS[1:], 1.0])
    masses = np.array([1 - 4e-3, 1e-3, 1e-3, 1e-3, 5e-4, 4e-4, 1e-4])
    assert abs(rng.choice(points, size=2_000_000, p=masses).mean() - null.mean()) < 0.05 * null.mean()
    use = NullUse(files=2)
    assert use.add(1000, 0.5 * 1000 * null.mean(), null) == pytest.approx(0.5)
    looser = MarginNull(levels=MARGIN_LEVELS, tail=tuple(2 * q for q in null.tail))
    assert use.add(1000, 1000 * null.mean(), looser) == pytest.approx(1.5 / 3)  # (0.5 + 1) m / (1 + 2) m
    assert use.add(3000, 0.0, null) == pytest.approx(1.0 / 5)  # the first file fell out of the window of 2

    from types import SimpleNamespace

    from validator.daemon import ValidatorDaemon

    from validator.metrics import Metrics
    daemon = SimpleNamespace(null_use=NullUse(), metrics=Metrics(), _null_use_warned=False,
                             config=SimpleNamespace(pool_id=7))
    outgrown = {"tokens": 1000, "score": 3 * 1000 * null.mean(), "null": null.model_dump()}
    with caplog.at_level("WARNING", logger="proofswarm.validator"):
        for _ in range(40):
            ValidatorDaemon._watch_null(daemon, outgrown)
    warnings = [r for r in caplog.records if "outgrown its calibration" in r.getMessage()]
    assert len(warnings) == 1 and "validator calibrate --pool 7" in warnings[0].getMessage()
    assert daemon.metrics.margin_null_use._value.get() == pytest.approx(3.0)


def test_the_loosest_of_several_nulls_bounds_each_of_them() -> None:
    quiet = MarginNull(levels=MARGIN_LEVELS, tail=(1.7e-5,) * 6, tokens=500_000)
    noisy = MarginNull(levels=MARGIN_LEVELS, tail=(1.6e-3, 1.5e-3, 1.3e-3, 5.5e-4, 1.7e-5, 1.6e-5), tokens=400_000)
    both = MarginNull.loosest([quiet, noisy])
    assert both.tail == (1.6e-3, 1.5e-3, 1.3e-3, 5.5e-4, 1.7e-5, 1.7e-5) and both.tokens == 400_000
    with pytest.raises(ValueError):
        MarginNull.loosest([quiet, MarginNull(levels=(0.0, 0.5), tail=(1e-3, 1e-4))])


def test_a_book_of_i_i_d_factors_counts_its_files_again_under_the_spread(tmp_path: Path) -> None:
    """A book written before the spread (factors of FACTOR_VERSION 1, no "factors" key): its open files' i.i.d.
    factors are dropped and the files count under the null of the file being judged, spread and all."""
    null, worker = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6), "0x" + "ef" * 20
    iid = MarginNull.fit([10, 5, 2, 0, 0, 0], 10**6).model_copy(update={"spread_shape": None, "miscalibration": 1.0})
    old = tmp_path / "old.json"
    old.write_text(json.dumps({worker: {"open": {"0x01": [2048, 3.0, iid.worker_log_terms(3.0, [2048])]},
                                        "challenged": {}}}))
    book = WorkerMargins(old)
    assert book.workers[worker] == {"open": {"0x01": [2048, 3.0]}, "challenged": {}, "factors": FACTOR_VERSION}
    assert book.log_e_value(worker, null) == pytest.approx(null.worker_log_e_value(3.0, [2048]))
    assert null.worker_log_e_value(3.0, [2048]) < iid.worker_log_e_value(3.0, [2048])
