"""How every role turns a task prompt into token ids."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """The prompt's token ids as the policy sees them; the policy continues with the answer.

    A tokenizer with a chat template gets the prompt as one user turn followed by the generation prompt
    (what an instruction-tuned checkpoint expects); otherwise it is BOS, when the tokenizer has one,
    then the prompt's tokens. Never an EOS.
    """
    if getattr(tokenizer, "chat_template", None):
        encoded = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                                tokenize=True)
        ids = encoded["input_ids"] if not isinstance(encoded, list) else encoded
        return [int(t) for t in ids]
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return [*bos, *tokenizer.encode(prompt, add_special_tokens=False)]
