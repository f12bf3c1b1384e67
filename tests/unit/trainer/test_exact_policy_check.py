"""`trainer init` refuses to start an exact pool from a policy exact mode cannot quantise (docs/protocol.md R5.8),
in one line, before anything is published; a float pool takes any policy."""

from __future__ import annotations

import tomllib

import pytest
from transformers import GPT2Config, GPT2LMHeadModel

from cli.errors import UsageError
from inference.tiny import build_char_tokenizer, build_tiny_llama
from protocol.runspec import RunSpec
from tests.support.paths import ROOT
from trainer.bootstrap import check_exact_policy


def _spec(inference: str) -> RunSpec:
    return RunSpec.model_validate(tomllib.loads((ROOT / "examples" / "run.toml").read_text()) | {"inference": inference})


def test_an_exact_pool_refuses_a_model_family_it_cannot_quantise():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=32, n_positions=32))
    with pytest.raises(UsageError, match="cannot be quantised: exact mode supports llama and qwen2 models, not gpt2"):
        check_exact_policy(_spec("exact"), gpt2)
    check_exact_policy(_spec("float"), gpt2)
    check_exact_policy(_spec("exact"), build_tiny_llama(len(build_char_tokenizer()), 0, hidden=16, layers=1, heads=2))
