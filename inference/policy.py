"""Loading a policy from a checkpoint folder (a fetched IPFS checkpoint or a local save)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from inference.backend import InferenceError


def load_policy(folder: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The Hugging Face model and tokenizer saved in `folder` (no network: local files only)."""
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InferenceError(f"cannot load a policy from {folder}: {str(exc).splitlines()[0]}") from None
    return model.eval(), tokenizer


def stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> tuple[int, ...]:
    """Every token that ends a completion: the tokenizer's EOS, the model config's and the generation
    config's (Qwen-style checkpoints stop on `<|im_end|>` and `<|endoftext|>`). Sorted, no duplicates."""
    generation = getattr(model, "generation_config", None)
    return collect_stop_ids(tokenizer.eos_token_id, model.config.eos_token_id, getattr(generation, "eos_token_id", None))


def collect_stop_ids(*values: int | list[int] | tuple[int, ...] | None) -> tuple[int, ...]:
    """The union of EOS ids as configs write them (an id, a list of ids, or None); sorted, no duplicates."""
    ids: set[int] = set()
    for value in values:
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if not ids:
        raise InferenceError("the checkpoint names no EOS token (tokenizer, config and generation config)")
    return tuple(sorted(ids))
