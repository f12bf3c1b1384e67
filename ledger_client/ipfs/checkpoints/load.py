"""Load: memory-map a verified checkpoint's shards into a state dict or a model."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file as _mmap_safetensors

from ledger_client.ipfs.checkpoints.errors import (
    CheckpointIncomplete,
)
from ledger_client.ipfs.checkpoints.files import FetchedCheckpoint
from protocol.manifest import (
    parse_manifest,
)


def load_state_dict(checkpoint: FetchedCheckpoint | Path) -> dict[str, torch.Tensor]:
    """The state dict of a fetched checkpoint, memory-mapped from its shards (tied names share
    one tensor). Raises :class:`CheckpointIncomplete` rather than return a partial dict."""
    folder = checkpoint.path if isinstance(checkpoint, FetchedCheckpoint) else Path(checkpoint)
    try:
        manifest = parse_manifest((folder / "manifest.json").read_bytes())
    except FileNotFoundError:
        raise CheckpointIncomplete(f"{folder} has no manifest.json (not a fetched checkpoint)") from None
    state_dict: dict[str, torch.Tensor] = {}
    for shard in manifest.shards:
        path = folder / shard.name
        if not path.exists() or path.stat().st_size != shard.size:
            raise CheckpointIncomplete(f"{shard.name} is missing or has the wrong size in {folder}")
        tensors = _mmap_safetensors(path)
        if set(tensors) != set(shard.tensors):
            raise CheckpointIncomplete(f"{shard.name} does not hold the tensors the manifest names")
        state_dict.update(tensors)
    for alias, target in manifest.aliases.items():
        state_dict[alias] = state_dict[target]
    return state_dict


def load_into(model: torch.nn.Module, checkpoint: FetchedCheckpoint | Path) -> torch.nn.Module:
    """Make the memory-mapped tensors of ``checkpoint`` the parameters of ``model`` (strict: every
    name must match; no copy of the weights is made). The model's own initial parameters are
    freed once replaced; build it on the meta device to skip even those, if it has no
    non-persistent buffers (Hugging Face rotary embeddings have one)."""
    state_dict = load_state_dict(checkpoint)
    model.load_state_dict(state_dict, strict=True, assign=True)
    tie_weights = getattr(model, "tie_weights", None)
    if callable(tie_weights):
        tie_weights()
    return model


# -- helpers ------------------------------------------------------------------------------------
