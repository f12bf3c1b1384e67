"""The one-call verifier: verdicts, evidence statistics, cheap checks before the prefill."""

from __future__ import annotations

import pytest
import torch

from inference.tiny import BOS_ID, EOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from inference.verify import (
    FP32_THRESHOLDS,
    CompletionRecord,
    VerifyConfig,
    verify_completion,
    verify_completions,
)
from proofs.sampling import derive_seed
from proofs.toploc import PAPER_THRESHOLDS, build_proofs
from protocol.runspec import SamplingSpec

TOKENIZER = build_char_tokenizer()
PARAMS = SamplingSpec(temperature=1.0, max_tokens=40)
CONFIG = VerifyConfig(sampling=PARAMS, thresholds=FP32_THRESHOLDS)
WORKER = "0x" + "11" * 20


def _model() -> TorchBackend:
    return TorchBackend(build_tiny_llama(len(TOKENIZER), 0, hidden=64, layers=2,
                                         lm_head_std=0.25, dtype=torch.bfloat16))


@pytest.fixture(scope="module")
def honest() -> tuple[TorchBackend, list[list[int]], list[int], list[CompletionRecord]]:
    backend = _model()
    prompts = [[BOS_ID, *TOKENIZER.encode(t)] for t in ("1+1=", "Say hi.", "abc")]
    seeds = [derive_seed(b"pool", WORKER, bytes(32), j) for j in range(3)]
    completions = backend.generate(prompts, PARAMS, seeds)
    records = [
        CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=build_proofs(c.hidden),
                         seed=c.seed, finish_reason=c.finish_reason)
        for p, c in zip(prompts, completions)
    ]
    return backend, prompts, seeds, records


def test_honest_completions_pass_every_check_with_statistics(honest) -> None:
    backend, prompts, seeds, records = honest
    verdicts = verify_completions(_model(), records, CONFIG, prompts, seeds)
    for verdict in verdicts:
        assert verdict.passed and verdict.failed == []
        names = [c.name for c in verdict.checks]
        assert names == ["tokens", "prompt", "seed", "termination", "sampling", "toploc"]
        toploc = verdict.check("toploc")
        assert toploc is not None and toploc.details["failing_chunks"] == []
        assert toploc.details["exp_mismatches"] == [0] * len(toploc.details["mant_err_mean"])
        sampling = verdict.check("sampling")
        assert sampling is not None and sampling.details["max_score_gap"] <= 2e-3


def test_structural_failures_skip_the_prefill_and_say_why(honest) -> None:
    backend, prompts, seeds, records = honest
    wrong_prompt = verify_completion(backend, records[0], CONFIG, prompts[1], seeds[0])
    assert wrong_prompt.failed == ["prompt"] and wrong_prompt.check("toploc") is None
    wrong_seed = verify_completion(backend, records[0], CONFIG, prompts[0], seeds[1])
    assert wrong_seed.failed == ["seed"]
    short = records[0].model_copy(update={
        "completion_ids": [5, 6, 7], "finish_reason": "length", "proofs": records[0].proofs[:1],
    })
    verdict = verify_completion(backend, short, CONFIG)
    assert verdict.failed == ["termination"]
    assert "without EOS" in verdict.check("termination").reason


def test_tampered_completion_fails_with_evidence(honest) -> None:
    backend, prompts, seeds, records = honest
    record = records[0]
    ids = list(record.completion_ids)
    ids[3] = 10 if ids[3] != 10 else 11
    verdict = verify_completion(backend, record.model_copy(update={"completion_ids": ids}),
                                CONFIG, prompts[0], seeds[0])
    sampling = verdict.check("sampling")
    assert sampling is not None and not sampling.passed
    assert 3 in sampling.details["failed_positions"]
    malformed = record.model_copy(update={"proofs": [b"\x00" * 10]})
    toploc = verify_completion(backend, malformed, CONFIG).check("toploc")
    assert toploc is not None and not toploc.passed and "malformed" in toploc.reason


def test_eos_must_be_final_and_plausible(honest) -> None:
    backend, _, _, records = honest
    record = records[0]
    fake = record.model_copy(update={
        "completion_ids": [*record.completion_ids[:5], EOS_ID], "finish_reason": "eos",
        "proofs": record.proofs[:1],
    })
    strict = CONFIG.model_copy(update={"min_eos_prob": 0.99})
    verdict = verify_completion(backend, fake, strict)
    assert "termination" in verdict.failed
    assert "implausible" in verdict.check("termination").reason


def test_an_eos_that_was_not_drawn_fails_the_replay_without_any_eos_floor(honest) -> None:
    """Why the p(EOS) floor is off by default: cutting a completion short with an EOS the seeded draw did not
    pick is caught by the sampling replay at that position."""
    backend, prompts, seeds, records = honest
    assert CONFIG.min_eos_prob == 0
    cut_short = 0
    for prompt, seed, record in zip(prompts, seeds, records):
        cut = min(5, len(record.completion_ids) - 1)
        if record.completion_ids[cut] == EOS_ID:  # the seeded draw did pick EOS there: nothing is cut
            continue
        cut_short += 1
        fake = record.model_copy(update={
            "completion_ids": [*record.completion_ids[:cut], EOS_ID], "finish_reason": "eos",
            "proofs": record.proofs[:1],
        })
        verdict = verify_completion(backend, fake, CONFIG, prompt, seed)
        assert "termination" not in verdict.failed
        sampling = verdict.check("sampling")
        assert sampling is not None and sampling.details["failed_positions"] == [cut]
    assert cut_short > 0


def test_paper_thresholds_are_the_default() -> None:
    assert VerifyConfig(sampling=PARAMS).thresholds == PAPER_THRESHOLDS
    with pytest.raises(ValueError):
        verify_completions(_model(), [], CONFIG, expected_prompts=[[1]])


def test_verdict_serialises_as_evidence(honest) -> None:
    backend, prompts, seeds, records = honest
    bad = records[1].model_copy(update={"seed": seeds[1] + 1})
    verdict = verify_completion(backend, bad, CONFIG, prompts[1], seeds[1])
    evidence = verdict.model_dump(mode="json")
    assert evidence["passed"] is False and evidence["failed"] == ["seed"]
    assert evidence["checks"][2]["reason"].startswith("seed")


def test_out_of_vocabulary_ids_fail_without_breaking_the_batch(honest) -> None:
    backend, prompts, seeds, records = honest
    ids = [10**6, *records[0].completion_ids[1:]]
    hostile = records[0].model_copy(update={"completion_ids": ids})
    empty = records[1].model_copy(update={"prompt_ids": []})
    verdicts = verify_completions(backend, [hostile, empty, records[2]], CONFIG)
    assert verdicts[0].failed == ["tokens"] and verdicts[1].failed == ["tokens"]
    assert verdicts[2].passed


def _records(prompts, completions) -> list[CompletionRecord]:
    return [CompletionRecord(prompt_ids=p, completion_ids=c.token_ids, proofs=build_proofs(c.hidden), seed=c.seed,
                             finish_reason=c.finish_reason)
            for p, c in zip(prompts, completions)]


def test_honest_completions_replay_whatever_the_batch_sizes_of_worker_and_validator() -> None:
    """The worker generates in batches of 1, 3 and 8; the validator prefills in one batch, left- or
    right-padded, chunked or not: every token replays with its score gap far inside the bound."""
    texts = ["1+1=", "Say hi.", "abc", "zz", "12345", "q", "hello world", "7*7="]
    prompts = [[BOS_ID, *TOKENIZER.encode(t)] for t in texts]
    seeds = [derive_seed(b"pool", WORKER, bytes(32), j) for j in range(len(prompts))]
    worker = _model()
    records = []
    for size in (1, 3, 8):
        for begin in range(0, len(prompts), size):
            part = slice(begin, begin + size)
            records += _records(prompts[part], worker.generate(prompts[part], PARAMS, seeds[part]))
    validator = _model()
    largest = 0.0
    for padding_side, chunk in (("right", None), ("left", None), ("right", 7)):
        validator.prefill_padding_side, validator.prefill_chunk_size = padding_side, chunk
        for verdict in verify_completions(validator, records, CONFIG, [r.prompt_ids for r in records],
                                          [r.seed for r in records]):
            check = verdict.check("sampling")
            assert verdict.passed and check is not None and check.passed
            largest = max(largest, check.details["max_score_gap"])
    assert largest < CONFIG.logit_tolerance / 10  # honest noise is far below the bound
    assert len({tuple(r.completion_ids) for r in records}) == len(prompts)  # same samples at every batch size


def test_prefill_batches_stay_within_the_token_budget_and_keep_every_verdict(honest, monkeypatch) -> None:
    """The validator prefills and checks at most `max_batch_tokens` positions at a time, so its memory does
    not grow with the file; each batch's verdicts are those of one batch holding every completion."""
    backend, prompts, seeds, records = honest
    records = _records(prompts, backend.generate(prompts, PARAMS, seeds)) * 3
    forged = [records[4].proofs[0][:2] + bytes(len(records[4].proofs[0]) - 2), *records[4].proofs[1:]]
    records[4] = records[4].model_copy(update={"proofs": forged})
    validator = _model()
    batches: list[int] = []
    original = TorchBackend.prefill_batch

    def recording(self, pairs, *args, **kwargs):
        batches.append(len(pairs) * max(len(p) + len(c) - 1 for p, c in pairs))
        return original(self, pairs, *args, **kwargs)

    monkeypatch.setattr(TorchBackend, "prefill_batch", recording)
    whole = verify_completions(validator, records, CONFIG.model_copy(update={"max_batch_tokens": 10**6}))
    assert len(batches) == 1
    batches.clear()
    budget = 2 * max(len(r.prompt_ids) + len(r.completion_ids) for r in records)
    bounded = verify_completions(validator, records, CONFIG.model_copy(update={"max_batch_tokens": budget}))
    assert len(batches) > 1 and max(batches) <= budget
    assert [v.failed for v in bounded] == [v.failed for v in whole] == [[]] * 4 + [["toploc"]] + [[]] * 4
    assert bounded[4].check("toploc").details["failing_chunks"] == [0]
    one_each = verify_completions(validator, records, CONFIG.model_copy(update={"max_batch_tokens": 1}))
    assert [v.failed for v in one_each] == [v.failed for v in whole]
