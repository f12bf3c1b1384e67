"""Why a checkpoint could not be published, fetched or loaded (all are CheckpointError)."""

from __future__ import annotations

from protocol.manifest import CheckpointError


class ManifestNotFound(CheckpointError):
    """No manifest could be retrieved for a digest."""


class ManifestTooLarge(CheckpointError):
    """The manifest does not fit in one IPFS block, so its digest would not be its sha256."""


class ShardHashMismatch(CheckpointError):
    """A shard's bytes do not hash to the sha256 the manifest names."""


class ShardSizeMismatch(CheckpointError):
    """A shard's byte size differs from the manifest's."""


class ShardUnavailable(CheckpointError):
    """A shard could not be retrieved from any reachable peer."""


class DiskFull(CheckpointError):
    """Not enough free disk space for the checkpoint."""


class InvalidCheckpointSource(CheckpointError):
    """What was given to publish is not a state dict or a usable model folder."""


class CheckpointIncomplete(CheckpointError):
    """The local checkpoint does not hold exactly the tensors its manifest names."""
