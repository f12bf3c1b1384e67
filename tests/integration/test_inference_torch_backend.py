"""Torch backend: generation with hidden-state capture, seeded sampling, prefill."""

from __future__ import annotations

import pytest
import torch

from inference.backend import Completion, InferenceBackend, InferenceError
from inference.tiny import BOS_ID, EOS_ID, build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from protocol.runspec import SamplingSpec

TOKENIZER = build_char_tokenizer()
VOCAB = len(TOKENIZER)


def _backend(seed: int = 0, **kwargs: object) -> TorchBackend:
    model = build_tiny_llama(VOCAB, seed, hidden=64, layers=2, lm_head_std=0.25,
                             dtype=torch.bfloat16)
    return TorchBackend(model, **kwargs)  # type: ignore[arg-type]


def _prompt(text: str) -> list[int]:
    return [BOS_ID, *TOKENIZER.encode(text)]


PROMPTS = [_prompt("What is 3+4?"), _prompt("Hi"), _prompt("Name a colour, please.")]


def test_backend_satisfies_the_protocol() -> None:
    assert isinstance(_backend(), InferenceBackend)


def test_hidden_is_the_lm_head_input_and_logprobs_match_a_plain_forward() -> None:
    backend = _backend()
    params = SamplingSpec(temperature=0.8, max_tokens=20)
    (completion,) = backend.generate(PROMPTS[:1], params, [5])
    ids = torch.tensor([PROMPTS[0] + completion.token_ids])
    with torch.no_grad():
        out = backend.model(ids, output_hidden_states=True)
    positions = slice(len(PROMPTS[0]) - 1, len(PROMPTS[0]) - 1 + len(completion.token_ids))
    final_hidden = out.hidden_states[-1][0, positions]
    assert torch.allclose(backend.lm_head(final_hidden), out.logits[0, positions])
    # the decode pass and this full forward differ by float32 noise, which flips a bf16 rounding now and then
    flips = completion.hidden != final_hidden.to(torch.bfloat16)
    assert int(flips.sum()) <= max(1, flips.numel() // 100)
    assert torch.allclose(completion.hidden.float(), final_hidden, rtol=2**-7, atol=0)
    expected = torch.log_softmax(out.logits[0, positions] / 0.8, -1)
    expected = expected.gather(1, torch.tensor(completion.token_ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-5)


def test_greedy_matches_transformers_generate() -> None:
    backend = _backend()
    (completion,) = backend.generate(PROMPTS[:1], SamplingSpec(temperature=0, max_tokens=16), [0])
    with torch.no_grad():
        reference = backend.model.generate(
            torch.tensor([PROMPTS[0]]), do_sample=False, max_new_tokens=16, min_new_tokens=16,
            pad_token_id=0,
        )
    generated = reference[0, len(PROMPTS[0]) :].tolist()
    assert completion.token_ids == generated[: len(completion.token_ids)]


def test_seeded_generation_is_reproducible_and_batch_independent() -> None:
    backend = _backend()
    params = SamplingSpec(temperature=1.0, max_tokens=24)
    batch = backend.generate(PROMPTS, params, [1, 2, 3])
    again = backend.generate(PROMPTS, params, [1, 2, 3])
    alone = [backend.generate([p], params, [s])[0] for p, s in zip(PROMPTS, [1, 2, 3])]
    for a, b, c in zip(batch, again, alone):
        assert a.token_ids == b.token_ids == c.token_ids
        assert (a.hidden.float() - c.hidden.float()).abs().max() <= 0.02
    other = backend.generate(PROMPTS, params, [7, 8, 9])
    assert [c.token_ids for c in other] != [c.token_ids for c in batch]


def test_finish_reasons_eos_and_length() -> None:
    backend = _backend()
    completions = backend.generate(PROMPTS * 4, SamplingSpec(max_tokens=12), list(range(12)))
    for c in completions:
        assert isinstance(c, Completion) and c.hidden.dtype == torch.bfloat16
        assert len(c.token_ids) == len(c.logprobs) == c.hidden.shape[0]
        if c.finish_reason == "eos":
            assert c.token_ids[-1] == EOS_ID and EOS_ID not in c.token_ids[:-1]
        else:
            assert len(c.token_ids) == 12 and EOS_ID not in c.token_ids
    greedy = SamplingSpec(temperature=0, max_tokens=50)
    first = backend.generate(PROMPTS[:1], greedy, [0])[0].token_ids[0]
    stop_at_first = TorchBackend(backend.model, eos_token_id=first)
    (one,) = stop_at_first.generate(PROMPTS[:1], greedy, [0])
    assert one.token_ids == [first] and one.finish_reason == "eos"


def test_top_p_keeps_tokens_in_the_nucleus() -> None:
    backend = _backend()
    params = SamplingSpec(temperature=1.0, top_p=0.3, max_tokens=16)
    (completion,) = backend.generate(PROMPTS[:1], params, [4])
    prefill = backend.prefill(PROMPTS[0], completion.token_ids)
    probs = torch.softmax(prefill.logits, -1)
    for row, token in zip(probs, completion.token_ids):
        assert float(row[row > row[token]].sum()) < 0.3


@pytest.mark.parametrize("padding_side", ["left", "right"])
@pytest.mark.parametrize("chunk_size", [None, 3])
def test_prefill_batch_matches_generation(padding_side: str, chunk_size: int | None) -> None:
    backend = _backend()
    completions = backend.generate(PROMPTS, SamplingSpec(max_tokens=20), [1, 2, 3])
    prefills = backend.prefill_batch(
        [(p, c.token_ids) for p, c in zip(PROMPTS, completions)],
        padding_side=padding_side, chunk_size=chunk_size,  # type: ignore[arg-type]
    )
    for c, pf in zip(completions, prefills):
        assert pf.hidden.shape == c.hidden.shape and pf.logits.shape == (len(c.token_ids), VOCAB)
        assert (pf.hidden.float() - c.hidden.float()).abs().max() <= 0.02
        logprobs = torch.log_softmax(pf.logits, -1).gather(1, torch.tensor(c.token_ids)[:, None])
        assert torch.allclose(logprobs.squeeze(1), torch.tensor(c.logprobs), atol=1e-4)


def test_prefill_of_an_empty_completion() -> None:
    prefill = _backend().prefill(PROMPTS[0], [])
    assert prefill.hidden.shape == (0, 64) and prefill.logits.shape == (0, VOCAB)


def test_bad_input_is_refused_by_name() -> None:
    backend = _backend()
    params = SamplingSpec(max_tokens=4)
    with pytest.raises(InferenceError):
        backend.generate(PROMPTS, params, [1])
    with pytest.raises(InferenceError):
        backend.generate([[]], params, [1])
    with pytest.raises(InferenceError):
        backend.generate([[VOCAB + 5]], params, [1])
    with pytest.raises(InferenceError):
        backend.prefill(PROMPTS[0], [-1])
    with pytest.raises(ValueError):
        SamplingSpec(top_p=0)
