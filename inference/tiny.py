"""Small models and tokenizers built in code (no downloads).

A character-level tokenizer (a real `tokenizers` WordLevel model wrapped in transformers'
PreTrainedTokenizerFast, so it round-trips through save_pretrained/from_pretrained) and a
randomly initialised Llama of a few thousand to a few million parameters. The worker, the
validator, the trainer and the tests all build their toy policies from these two functions.
"""

from __future__ import annotations

import string

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)

# Ids 0..3 are the special tokens, in SPECIAL_TOKENS order; characters follow.
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)

DEFAULT_ALPHABET: str = string.digits + string.ascii_letters + string.punctuation + " \n"


def char_vocab(alphabet: str = DEFAULT_ALPHABET) -> dict[str, int]:
    """Token -> id map: the special tokens first, then each distinct character of `alphabet`."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in alphabet:
        if ch not in vocab:
            vocab[ch] = len(vocab)
    return vocab


def build_char_tokenizer(alphabet: str = DEFAULT_ALPHABET) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: one token per character, unknown characters -> <unk>.

    `encode` adds no special tokens; prepend `tokenizer.bos_token_id` yourself where a
    prompt needs one. `decode(..., skip_special_tokens=True)` gives back the text exactly.
    """
    core = Tokenizer(models.WordLevel(vocab=char_vocab(alphabet), unk_token=UNK_TOKEN))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        clean_up_tokenization_spaces=False,
    )
    return tokenizer


def build_tiny_llama(
    vocab_size: int,
    seed: int,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    max_positions: int = 1024,
    dtype: torch.dtype = torch.float32,
    tie_embeddings: bool = False,
    lm_head_std: float | None = None,
) -> LlamaForCausalLM:
    """A randomly initialised LlamaForCausalLM, deterministic in `seed`.

    The special-token ids of `build_char_tokenizer` are written into the config, so
    `generate`/`save_pretrained` behave as with a real checkpoint. `dtype` may be
    torch.bfloat16 (the pool's policy dtype) or torch.float32. `lm_head_std` re-initialises the
    (untied) LM head with that standard deviation: about 2/sqrt(hidden) gives logits with the
    spread of a trained model's (peaked next-token distributions) instead of the near-uniform
    ones of a fresh init.
    """
    if lm_head_std is not None and tie_embeddings:
        raise ValueError("lm_head_std needs an untied LM head")
    if hidden % heads != 0:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate if intermediate is not None else 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads if kv_heads is not None else heads,
        head_dim=hidden // heads,
        max_position_embeddings=max_positions,
        rms_norm_eps=1e-6,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        tie_word_embeddings=tie_embeddings,
    )
    fork_devices: list[int] = []
    with torch.random.fork_rng(devices=fork_devices):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        if lm_head_std is not None:
            torch.nn.init.normal_(model.lm_head.weight, std=lm_head_std)
    model.to(dtype)
    model.eval()
    return model


TINY_SORT_SPEC = RunSpec(
    # length targets make rewards continuous, so even an untrained policy's groups carry a learning signal
    task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}, "length_targets": [4, 8]},
    sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=8),
    prompts_per_submission=2,
    pool_seed="0x" + "5e" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                  toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True),
)
"""A tiny policy's pool (the e2e protocol tests' and bench.scale's): the sort task, 2 prompts × 4 completions × ≤ 8
tokens a file, TOPLOC thresholds that hold for the tiny policy's float32 runs."""
