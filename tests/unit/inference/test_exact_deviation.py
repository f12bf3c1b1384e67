"""The evidence of an exact pool's challenge (docs/protocol.md R5.8): the first token that is not the sampling rule's
draw, the draw the validator expected, and both tokens' Q16 logits and scores, all recomputable from the policy."""

from __future__ import annotations

import torch

from inference import exact
from inference.exact_backend import ExactBackend
from inference.tiny import build_char_tokenizer, build_tiny_llama
from protocol.runspec import SamplingSpec
from validator.checks import exact_evidence

TOKENIZER = build_char_tokenizer()
POLICY = exact.quantise_policy(build_tiny_llama(len(TOKENIZER), 0, hidden=32, layers=1, lm_head_std=0.35))
PROMPT = TOKENIZER.encode("sort 4 1 7")
SEED = 77


def _honest() -> list[int]:
    backend = ExactBackend(POLICY, [TOKENIZER.eos_token_id], TOKENIZER.pad_token_id)
    (completion,) = backend.generate([PROMPT], SamplingSpec(max_tokens=8, temperature=1.0), [SEED])
    return completion.token_ids


def test_an_honest_completion_has_no_deviation():
    assert exact.deviation(POLICY, PROMPT, _honest(), SEED, 1.0) is None


def test_a_changed_token_is_the_deviation_with_the_integers_that_decide_it():
    honest = _honest()
    position = min(3, len(honest) - 1)
    worker = (honest[position] + 1) % POLICY.vocab_size
    changed = honest[:position] + [worker] + honest[position + 1:]
    found = exact.deviation(POLICY, PROMPT, changed, SEED, 1.0)
    assert (found.position, found.expected, found.got) == (position, honest[position], worker)
    logits = exact.prefill_logits(POLICY, PROMPT, changed)[position]
    assert (found.expected_logit, found.got_logit) == (int(logits[honest[position]]), int(logits[worker]))
    assert found.expected_score > found.got_score or (found.expected_score == found.got_score
                                                       and found.expected < found.got)
    assert exact.first_deviation(POLICY, PROMPT, changed, SEED, 1.0) == position
    assert exact_evidence(5, found) == {"completion": 5, "position": position, "expected": honest[position],
                                        "got": worker, "expected_logit": found.expected_logit,
                                        "got_logit": found.got_logit, "expected_score": found.expected_score,
                                        "got_score": found.got_score}


def test_the_scores_are_the_sampling_rules():
    logits = exact.prefill_logits(POLICY, PROMPT, _honest())[0]
    scores = exact.token_scores(logits, SEED, 0, 1.0, range(POLICY.vocab_size))
    drawn = exact.sample_fixed(logits[None], torch.tensor([SEED]), 0, 1.0)
    assert scores.index(max(scores)) == int(drawn[0])
