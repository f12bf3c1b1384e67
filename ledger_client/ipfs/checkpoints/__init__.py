"""Policy checkpoints over IPFS: sharded safetensors, a manifest, per-shard verification.

Publish (trainer): state dict or Hugging Face model folder -> safetensors shards of
``shard_bytes`` each (a bigger tensor gets a shard of its own) -> each added to Kubo and pinned
-> manifest (protocol/manifest.py) added as one raw block -> ``on_chain(step,
digest)`` (wired to ``publishCheckpoint``) -> older versions unpinned.

Fetch (workers, validators): digest -> manifest -> shards in parallel into a local folder, each
hashed while it streams and checked against the manifest before it is renamed into place; a bad
shard is fetched again; files already present are re-verified and kept, so an interrupted fetch
resumes. The folder is also a valid Hugging Face model folder (config.json, tokenizer files,
model.safetensors.index.json). Everything fetched is pinned and provided by the local node, so
every worker serves the checkpoint to the others.

Deltas: with the parent's tensors, publish also adds a sparse patch (changed elements only,
zstd; checkpoints/delta.py) named by the manifest; a fetcher holding the parent rebuilds the
shards from it, keeps them only if their sha256 match the manifest, and downloads them otherwise.

Load: :func:`load_state_dict` memory-maps the verified shards (no copy of the weights in RAM);
:func:`load_into` assigns those tensors as the model's parameters.
"""

from ledger_client.ipfs.checkpoints.delta import InvalidDelta, apply_delta, encode_delta
from ledger_client.ipfs.checkpoints.errors import (
    CheckpointIncomplete,
    DiskFull,
    InvalidCheckpointSource,
    ManifestNotFound,
    ManifestTooLarge,
    ShardHashMismatch,
    ShardSizeMismatch,
    ShardUnavailable,
)
from ledger_client.ipfs.checkpoints.fetch import fetch_checkpoint, fetch_manifest, manifest_cid_of
from ledger_client.ipfs.checkpoints.files import FetchedCheckpoint, TransferProgress
from ledger_client.ipfs.checkpoints.load import load_into, load_state_dict
from ledger_client.ipfs.checkpoints.publish import (
    DEFAULT_SHARD_BYTES,
    PublishedCheckpoint,
    load_model_folder,
    plan_shards,
    publish_checkpoint,
    split_aliases,
)
from ledger_client.ipfs.checkpoints.retention import PinRetention, RetainedVersion

__all__ = [
    "DEFAULT_SHARD_BYTES", "CheckpointIncomplete", "InvalidDelta", "apply_delta", "encode_delta", "DiskFull", "FetchedCheckpoint", "InvalidCheckpointSource",
    "ManifestNotFound", "ManifestTooLarge", "PinRetention", "PublishedCheckpoint", "RetainedVersion",
    "ShardHashMismatch", "ShardSizeMismatch", "ShardUnavailable", "TransferProgress", "fetch_checkpoint",
    "fetch_manifest", "load_into", "load_model_folder", "load_state_dict", "manifest_cid_of", "plan_shards",
    "publish_checkpoint", "split_aliases",
]
