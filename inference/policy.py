"""Loading a policy from a checkpoint folder (a fetched IPFS checkpoint or a local save)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from pydantic import ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from inference.backend import InferenceError
from protocol.manifest import CheckpointManifest, InvalidManifest, parse_manifest


def load_policy(folder: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The Hugging Face model and tokenizer saved in `folder` (no network: local files only)."""
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InferenceError(f"cannot load a policy from {folder}: {str(exc).splitlines()[0]}") from None
    return model.eval(), tokenizer


class PolicyLoader:
    """`load_policy` for a role that follows one pool's checkpoints, one step after another.

    A fetched checkpoint folder carries its manifest (manifest.json). When the manifest's model config and
    tokenizer files are those of the policy loaded last, the new policy is a copy of that model with the new
    shards' weights loaded into it, and the same tokenizer: the weights are all that differ between a pool's
    steps, and `from_pretrained` (config parsing, model construction, tokenizer files) costs several times
    the copy on a small model. Any other folder, and a manifest whose tensors do not fit the model, is loaded
    by `load_policy`. The copy is taken from the policy loaded last (which its caller holds anyway), so this
    keeps no extra model in memory.
    """

    def __init__(self) -> None:
        self._last: tuple[str, PreTrainedModel, PreTrainedTokenizerBase] | None = None

    def __call__(self, folder: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        manifest = _manifest_in(Path(folder))
        key = _architecture_key(manifest) if manifest is not None else None
        if key is not None and self._last is not None and self._last[0] == key:
            model = copy.deepcopy(self._last[1])
            if _load_shards(model, Path(folder), manifest):
                self._last = (key, model, self._last[2])
                return model.eval(), self._last[2]
        model, tokenizer = load_policy(Path(folder))
        self._last = (key, model, tokenizer) if key is not None else None
        return model, tokenizer


def _manifest_in(folder: Path) -> CheckpointManifest | None:
    try:
        return parse_manifest((folder / "manifest.json").read_bytes())
    except (OSError, InvalidManifest, ValidationError, ValueError):
        return None


def _architecture_key(manifest: CheckpointManifest) -> str | None:
    """What a policy shares with the one loaded before it, if it may be copied from it: the model config and
    the tokenizer files (by content address). None: no config (not a Hugging Face folder)."""
    if manifest.config is None:
        return None
    return json.dumps({"config": manifest.config, "tokenizer": sorted((f.name, f.cid) for f in manifest.tokenizer_files)},
                      sort_keys=True)


def _load_shards(model: PreTrainedModel, folder: Path, manifest: CheckpointManifest) -> bool:
    """Copy the manifest's shards (its aliases too) into `model`; False when they do not fit it exactly
    (every parameter and persistent buffer named, nothing else, the same shapes)."""
    state: dict[str, torch.Tensor] = {}
    try:
        for shard in manifest.shards:
            state.update(load_file(folder / shard.name))
    except (OSError, SafetensorError):
        return False
    for alias, target in manifest.aliases.items():
        if target in state:
            state[alias] = state[target]
    expected = model.state_dict()
    tied = {key for key in expected if key not in state and is_tied_output(model, key)}
    if set(state) | tied != set(expected) or any(state[k].shape != expected[k].shape for k in state):
        return False
    with torch.no_grad():
        model.load_state_dict(state, strict=False)
    return True


def is_tied_output(model: PreTrainedModel, key: str) -> bool:
    """Whether parameter `key` is the output embedding of a model whose embeddings are tied."""
    output = model.get_output_embeddings()
    if not (getattr(model.config, "tie_word_embeddings", False) and output is not None and key.endswith("weight")):
        return False
    try:
        parameter = model.get_parameter(key)
    except AttributeError:  # a buffer, or no such name
        return False
    return parameter is output.weight and output.weight is model.get_input_embeddings().weight


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
