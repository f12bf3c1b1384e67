"""How every role turns a task prompt into token ids."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """BOS followed by the prompt's tokens (no EOS): the policy continues with the answer."""
    return [tokenizer.bos_token_id, *tokenizer.encode(prompt, add_special_tokens=False)]
