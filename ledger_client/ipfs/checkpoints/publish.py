"""Publish: state dict or Hugging Face folder -> safetensors shards -> Kubo -> manifest -> on-chain hook."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import torch
from safetensors.torch import load_file as _mmap_safetensors
from safetensors.torch import save as _safetensors_bytes

from ledger_client.ipfs.checkpoints.delta import encode_delta
from ledger_client.ipfs.checkpoints.errors import (
    InvalidCheckpointSource,
    ManifestTooLarge,
)
from ledger_client.ipfs.checkpoints.files import (
    NoProgress,
    TransferProgress,
    sha256_file,
)
from ledger_client.ipfs.checkpoints.retention import PinRetention, RetainedVersion
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import RAW, cid_codec, cid_to_digest
from ledger_client.ipfs.defaults import DEFAULT_SHARD_BYTES
from protocol.manifest import (
    SCHEMA_VERSION,
    CheckpointManifest,
    PolicyVerification,
    Shard,
    StoredFile,
)

DELTA_FILE_NAME: Final = "model.delta"
DELTA_WORTH_FRACTION: Final = 0.5
"""A policy goes out with a patch only when the patch (before compression) is at most this fraction of its shards:
a bf16 RL step changes few values (a patch of 0.0044 of the shards in `bench.delta`), a float32 one nearly all (0.93
compressed for the CPU recipe), and such a patch costs the publisher an encoding and every fetcher an application
(8–13 and 4–5 ms a step on the CPU recipe's 4 MB, idle cores) to save 7 % of a download."""
# Files of a Hugging Face model folder that travel with the weights.
TOKENIZER_FILE_NAMES: Final = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "generation_config.json",
)


OnChain = Callable[[int, bytes], None]


@dataclass(frozen=True)
class PublishedCheckpoint:
    """What :func:`publish_checkpoint` produced."""

    manifest: CheckpointManifest
    manifest_cid: str
    digest: bytes
    seconds: float

    @property
    def patch_ratio(self) -> float | None:
        """Bytes of the delta over bytes of the full shards (None without a delta)."""
        if self.manifest.delta is None:
            return None
        return self.manifest.delta.size / sum(s.size for s in self.manifest.shards)


def encode_shard(tensors: Mapping[str, torch.Tensor]) -> bytes:
    """The bytes of one safetensors shard (deterministic: a fetcher rebuilding a shard from a delta
    gets the very bytes the manifest hashes)."""
    return _safetensors_bytes(dict(tensors), metadata={"format": "pt"})


def plan_shards(sizes: Sequence[tuple[str, int]], shard_bytes: int) -> list[list[str]]:
    """Group tensors (in order) into shards of at most ``shard_bytes``; a tensor bigger than
    that gets a shard of its own."""
    if shard_bytes <= 0:
        raise ValueError("shard_bytes must be positive")
    shards: list[list[str]] = []
    current: list[str] = []
    current_bytes = 0
    for name, size in sizes:
        if current and current_bytes + size > shard_bytes:
            shards.append(current)
            current, current_bytes = [], 0
        current.append(name)
        current_bytes += size
    if current:
        shards.append(current)
    return shards


def split_aliases(state_dict: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Separate tied tensors (same storage, offset, shape, stride and dtype) from the tensors to
    store: returns (tensors to store, alias name -> stored name). Other tensors that overlap in
    memory are copied, because safetensors refuses to store shared memory."""
    views: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    first_of_view: dict[tuple[object, ...], str] = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor):
            raise InvalidCheckpointSource(f"state dict entry {name!r} is not a tensor")
        tensor = tensor.detach().cpu()
        key = (_storage_ptr(tensor), tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()),
               tensor.dtype)
        if tensor.numel() and key in first_of_view:
            aliases[name] = first_of_view[key]
        else:
            first_of_view[key] = name
            views[name] = tensor
    users: dict[int, int] = {}
    for tensor in views.values():
        if tensor.numel():
            users[_storage_ptr(tensor)] = users.get(_storage_ptr(tensor), 0) + 1
    stored = {
        name: tensor.clone() if users.get(_storage_ptr(tensor), 0) > 1 else tensor.contiguous()
        for name, tensor in views.items()
    }
    return stored, aliases


def _storage_ptr(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def load_model_folder(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, object] | None, list[Path]]:
    """Read a Hugging Face model folder: (state dict memory-mapped from its safetensors files,
    config.json as a dict, tokenizer files present)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidCheckpointSource(f"{folder} is not a folder")
    weight_files = sorted(folder.glob("*.safetensors"))
    if not weight_files:
        raise InvalidCheckpointSource(f"{folder} has no *.safetensors weights")
    state_dict: dict[str, torch.Tensor] = {}
    for path in weight_files:
        try:
            state_dict.update(_mmap_safetensors(path))
        except Exception as exc:  # safetensors raises its own SafetensorError and OSError
            raise InvalidCheckpointSource(f"{path.name} is not a readable safetensors file: {exc}") from None
    config = None
    if (folder / "config.json").exists():
        try:
            config = json.loads((folder / "config.json").read_text())
        except json.JSONDecodeError as exc:
            raise InvalidCheckpointSource(f"{folder / 'config.json'} is not JSON: {exc}") from None
    tokenizer_files = [folder / name for name in TOKENIZER_FILE_NAMES if (folder / name).is_file()]
    return state_dict, config, tokenizer_files


def publish_checkpoint(
    kubo: KuboClient,
    source: Mapping[str, torch.Tensor] | Path,
    *,
    step: int,
    parent: str | None = None,
    config: Mapping[str, object] | None = None,
    tokenizer_files: Sequence[Path] = (),
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    on_chain: OnChain | None = None,
    retention: PinRetention | None = None,
    progress: TransferProgress | None = None,
    metrics: str | None = None,
    parent_state: Mapping[str, torch.Tensor] | None = None,
    verification: PolicyVerification | None = None,
) -> PublishedCheckpoint:
    """Shard ``source`` (a state dict, or a Hugging Face model folder whose config and
    tokenizer files are taken along), add everything to Kubo pinned, add the manifest (naming
    ``metrics``, the CID of the step's metrics object, if given), call ``on_chain(step, digest)``,
    then let ``retention`` unpin versions that fell out. With ``parent_state`` (the parent's tensors)
    a sparse patch against the parent goes along too (checkpoints/delta.py), named by the manifest; with
    ``verification`` the manifest carries tolerances recalibrated on this policy (protocol.manifest)."""
    started = time.monotonic()
    progress = progress or NoProgress()
    if isinstance(source, (str, Path)):
        state_dict, folder_config, folder_tokenizer = load_model_folder(Path(source))
        config = config if config is not None else folder_config
        tokenizer_files = tokenizer_files or folder_tokenizer
    else:
        state_dict = dict(source)
    if not state_dict:
        raise InvalidCheckpointSource("the state dict is empty")
    if step < 0:
        raise InvalidCheckpointSource(f"step must be >= 0, got {step}")
    stored, aliases = split_aliases(state_dict)
    dtypes = {str(t.dtype).removeprefix("torch.") for t in stored.values()}
    plan = plan_shards([(n, t.numel() * t.element_size()) for n, t in stored.items()], shard_bytes)
    tokenizer_paths = [Path(p) for p in tokenizer_files]
    for path in tokenizer_paths:
        if not path.is_file():
            raise InvalidCheckpointSource(f"tokenizer file {path} does not exist")
    total = sum(t.numel() * t.element_size() for t in stored.values())
    total += sum(p.stat().st_size for p in tokenizer_paths)
    progress.start(total, len(plan) + len(tokenizer_paths))

    shards: list[Shard] = []
    for index, names in enumerate(plan, start=1):
        file_name = f"model-{index:05d}-of-{len(plan):05d}.safetensors"
        data = encode_shard({n: stored[n] for n in names})
        cid = kubo.add_bytes(data)
        shards.append(Shard(name=file_name, cid=cid, sha256=hashlib.sha256(data).hexdigest(),
                            size=len(data), tensors=names))
        progress.advance(sum(stored[n].numel() * stored[n].element_size() for n in names))
        progress.file_done(file_name)
        del data
    extra: list[StoredFile] = []
    for path in tokenizer_paths:
        cid = kubo.add_file(path)
        extra.append(StoredFile(name=path.name, cid=cid, sha256=sha256_file(path), size=path.stat().st_size))
        progress.advance(path.stat().st_size)
        progress.file_done(path.name)

    delta = None
    patch = None
    if parent_state is not None and parent is not None:
        patch = encode_delta(parent_state, stored, max_fraction=DELTA_WORTH_FRACTION)
    if patch is not None:
        delta = StoredFile(name=DELTA_FILE_NAME, cid=kubo.add_bytes(patch), sha256=hashlib.sha256(patch).hexdigest(),
                           size=len(patch))
        del patch
    manifest = CheckpointManifest(
        schema_version=SCHEMA_VERSION,
        step=step,
        parent=parent,
        config=dict(config) if config is not None else None,
        tokenizer_files=extra,
        dtype=dtypes.pop() if len(dtypes) == 1 else "mixed",
        shards=shards,
        aliases=aliases,
        metrics=metrics,
        delta=delta,
        verification=verification,
    )
    manifest_bytes = manifest.to_bytes()
    manifest_cid = kubo.add_bytes(manifest_bytes)
    if cid_codec(manifest_cid) != RAW:
        kubo.pin_rm(manifest_cid)
        raise ManifestTooLarge(f"manifest of {len(manifest_bytes)} bytes does not fit in one IPFS block")
    digest = cid_to_digest(manifest_cid)
    if on_chain is not None:
        on_chain(step, digest)
    if retention is not None:
        retention.record(RetainedVersion(
            step=step, manifest_cid=manifest_cid, cids=[f.cid for f in [*shards, *extra, *([delta] if delta else [])]]
        ))
    return PublishedCheckpoint(manifest, manifest_cid, digest, time.monotonic() - started)
