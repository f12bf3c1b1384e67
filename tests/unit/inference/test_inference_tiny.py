"""The in-code tokenizer and tiny Llama: deterministic, round-trippable, no downloads."""

import torch
from transformers import AutoTokenizer, LlamaForCausalLM

from inference.tiny import BOS_ID, EOS_ID, PAD_ID, build_char_tokenizer, build_tiny_llama


def test_char_tokenizer_round_trips_text_and_special_tokens() -> None:
    tok = build_char_tokenizer()
    text = "What is 12+30? Answer: 42."
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    assert tok.decode([BOS_ID, *ids, EOS_ID, PAD_ID], skip_special_tokens=True) == text
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (PAD_ID, BOS_ID, EOS_ID)
    assert tok.encode("\u00e9") == [tok.unk_token_id]


def test_char_tokenizer_saves_and_loads_like_a_real_one(tmp_path) -> None:
    tok = build_char_tokenizer()
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.encode("a b, c!") == tok.encode("a b, c!")
    assert loaded.eos_token_id == EOS_ID and len(loaded) == len(tok)


def test_tiny_llama_is_deterministic_in_seed_and_round_trips(tmp_path) -> None:
    vocab = len(build_char_tokenizer())
    a, b, c = (build_tiny_llama(vocab, s) for s in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)
    a.save_pretrained(tmp_path)
    loaded = LlamaForCausalLM.from_pretrained(tmp_path)
    ids = torch.tensor([[BOS_ID, 10, 11, 12]])
    with torch.no_grad():
        assert torch.equal(a(ids).logits, loaded(ids).logits)


def test_tiny_llama_bf16() -> None:
    model = build_tiny_llama(50, 0, hidden=32, layers=1, dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    with torch.no_grad():
        logits = model(torch.tensor([[1, 5, 6]])).logits
    assert logits.shape == (1, 3, 50) and torch.isfinite(logits.float()).all()
