"""Real-format Hugging Face model folders, built offline with random weights.

No weights can be downloaded here, so these stand in for a user's checkpoint: each folder is what
`save_pretrained` writes for a real model of its family (config.json, generation_config.json,
model.safetensors, tokenizer.json + tokenizer_config.json with a chat template), and every role loads it
with the same code a real checkpoint goes through (`inference.policy.load_policy`).

- `qwen2_style`: ByteLevel BPE, no BOS, tied embeddings, bf16, ChatML template, two EOS ids
  (`<|im_end|>` and `<|endoftext|>`), like Qwen2/Qwen2.5.
- `llama_style`: BPE with a BOS, untied embeddings, `</s>` EOS, a plain template, like Llama 2.

    python -m examples.hf_models OUT_DIR [--family qwen2|llama] [--vocab 32768]
"""

from __future__ import annotations

import argparse
import random
import string
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PLAIN_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}Q: {{ message['content'] }}\n"
    "{% else %}A: {{ message['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}A: {% endif %}"
)


def _corpus(n_words: int, seed: int) -> list[str]:
    """Text with enough distinct pieces for a large BPE vocabulary, plus the digits and words tasks use."""
    rng = random.Random(seed)
    letters = string.ascii_letters + string.digits
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(n_words)]
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    lines += [" ".join(str(rng.randrange(10**rng.randint(1, 6))) for _ in range(10)) for _ in range(500)]
    lines += ["Sort the digits: 312 -> 123", "Reverse: abc -> cba", "Q: A: answer"] * 50
    return lines


def _bpe(vocab: int, special: list[str], byte_level: bool, seed: int) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None if byte_level else "<unk>"))
    if byte_level:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        alphabet = list(string.printable)
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=special, initial_alphabet=alphabet,
                                  show_progress=False, min_frequency=1)
    tokenizer.train_from_iterator(_corpus(vocab * 3, seed), trainer=trainer)
    return tokenizer


def qwen2_style(folder: Path, vocab: int = 32768, hidden: int = 64, layers: int = 2, seed: int = 0,
                model_vocab: int | None = None, heads: int = 4, kv_heads: int = 2,
                intermediate: int | None = None) -> Path:
    """A Qwen2-style folder (see the module docstring); returns `folder`. `model_vocab` pads the embedding
    beyond the tokenizer's vocabulary, as Qwen2 does (151,936 rows for ~151,646 tokens), e.g. 152,064 to
    measure costs at Qwen's size without training a 152k BPE. Qwen2.5-0.5B's shape is hidden 896, 24
    layers, 14 heads, 2 KV heads, intermediate 4864, model_vocab 151,936."""
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    raw = _bpe(vocab, special, byte_level=True, seed=seed)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, chat_template=CHATML_TEMPLATE)
    eos_ids = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    config = Qwen2Config(vocab_size=max(model_vocab or 0, len(tokenizer)), hidden_size=hidden,
                         intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=eos_ids[1], pad_token_id=eos_ids[1])
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=eos_ids, pad_token_id=eos_ids[1], bos_token_id=None)
    return _save(folder, model, tokenizer)


def llama_style(folder: Path, vocab: int = 32000, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """A Llama-style folder (see the module docstring); returns `folder`."""
    raw = _bpe(vocab, ["<unk>", "<s>", "</s>"], byte_level=False, seed=seed)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                        pad_token="</s>", chat_template=PLAIN_TEMPLATE)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=512, tie_word_embeddings=False,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    return _save(folder, model, tokenizer)


def _save(folder: Path, model, tokenizer) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--family", choices=["qwen2", "llama"], default="qwen2")
    parser.add_argument("--vocab", type=int, default=32768)
    args = parser.parse_args()
    build = qwen2_style if args.family == "qwen2" else llama_style
    print(build(args.out, vocab=args.vocab))


if __name__ == "__main__":
    main()
