"""The checkpoint manifest: the one small JSON object whose digest goes on-chain.

It is stored in Kubo as a single raw block, so the on-chain digest is ``sha256(manifest bytes)``
(see protocol/digest.py). Everything else (weight shards, tokenizer files) is named inside it
by CID and sha256.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proofs.margins import MarginNull
from proofs.toploc_thresholds import ChunkLimits
from protocol.digest import cid_to_digest

SCHEMA_VERSION: Final = 1
OPTIONAL_FIELDS: Final = ("metrics", "delta", "verification")  # left out of the encoding when unset
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class CheckpointError(RuntimeError):
    """Base class of every checkpoint publish/fetch/load error (one-line messages)."""


class InvalidManifest(CheckpointError):
    """The manifest is not valid JSON or lacks/mistypes required fields."""


class UnsupportedManifestVersion(CheckpointError):
    """The manifest's ``schema_version`` is one this code does not know."""


class StoredFile(BaseModel):
    """A file stored in IPFS and named in the manifest (a shard or a tokenizer file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    cid: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)

    @field_validator("name")
    @classmethod
    def _plain_file_name(cls, name: str) -> str:
        # names become local file names: refuse paths, so a manifest cannot write outside its folder
        if not _SAFE_NAME.match(name) or name in {"manifest.json", "model.safetensors.index.json"}:
            raise ValueError(f"{name!r} is not a plain file name")
        return name

    @field_validator("cid")
    @classmethod
    def _usable_cid(cls, cid: str) -> str:
        cid_to_digest(cid)  # raises InvalidCid, a ValueError, on anything we cannot fetch
        return cid


class Shard(StoredFile):
    """One safetensors file of the checkpoint and the tensors it holds."""

    tensors: list[str] = Field(min_length=1)


class PolicyVerification(BaseModel):
    """Tolerances recalibrated on this policy (`validator calibrate` on its weights), for the files generated
    with it: the fields of the run spec's `[verification]` that calibration measures, with the same meaning.
    Training sharpens a policy and honest low-precision noise grows with it (docs/protocol.md, "Thresholds that
    follow the policy"), so the values a pool calibrated at creation would, later, challenge honest workers. They
    can only loosen the run spec's: validators apply the looser of each (`VerificationSpec.for_policy`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    logit_tolerance: float = Field(ge=0)
    margin_levels: list[float]
    margin_tail: list[float]
    margin_tokens: int = Field(ge=0)
    toploc_min_exp_matches: int = Field(ge=0)
    toploc_max_mant_err_mean: float = Field(ge=0)
    toploc_max_mant_err_median: float = Field(ge=0)
    toploc_mean_excludes_max: bool
    toploc_by_tokens: list[ChunkLimits]

    @model_validator(mode="after")
    def _a_margin_null(self) -> PolicyVerification:
        self.margin_null()
        return self

    def margin_null(self) -> MarginNull:
        """The honest margin distribution these values state."""
        return MarginNull(levels=tuple(self.margin_levels), tail=tuple(self.margin_tail), tokens=self.margin_tokens)


class CheckpointManifest(BaseModel):
    """Everything a worker needs to rebuild the policy of one training step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    step: int = Field(ge=0)
    parent: str | None = Field(description="manifest CID of the previous checkpoint, if any")
    config: dict[str, Any] | None = Field(description="Hugging Face model config (config.json)")
    tokenizer_files: list[StoredFile]
    dtype: str = Field(description="dtype of every tensor, or 'mixed'")
    shards: list[Shard] = Field(min_length=1)
    aliases: dict[str, str] = Field(
        description="tensor name -> name of the stored tensor it shares memory with (tied weights)"
    )
    metrics: str | None = Field(
        None, description="CID of the trainer's metrics of the step that produced this policy (a small JSON object)"
    )
    delta: StoredFile | None = Field(
        None, description="sparse patch that rebuilds the shards from the parent's tensors "
                          "(ledger_client/ipfs/checkpoints/delta.py); the shards stay the reference"
    )
    verification: PolicyVerification | None = Field(
        None, description="tolerances recalibrated on this policy; they only loosen the run spec's"
    )

    @field_validator("parent", "metrics")
    @classmethod
    def _optional_cid(cls, cid: str | None) -> str | None:
        if cid is not None:
            cid_to_digest(cid)
        return cid

    @property
    def total_bytes(self) -> int:
        """Bytes of all shards and tokenizer files together."""
        return sum(f.size for f in self.shards) + sum(f.size for f in self.tokenizer_files)

    @property
    def tensor_names(self) -> set[str]:
        """Every tensor name of the state dict, aliases included."""
        return {name for shard in self.shards for name in shard.tensors} | set(self.aliases)

    def to_bytes(self) -> bytes:
        """The canonical encoding stored in IPFS (its sha256 is the on-chain digest). Optional fields
        that are unset (metrics, delta, verification) are left out, so such manifests keep the bytes (and digests)
        they had before those fields existed."""
        unset = {name for name in OPTIONAL_FIELDS if getattr(self, name) is None}
        return self.model_dump_json(exclude=unset or None).encode()


def parse_manifest(data: bytes) -> CheckpointManifest:
    """Decode and validate manifest bytes; raise a named one-line error on anything wrong."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidManifest(f"manifest is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidManifest("manifest is not a JSON object")
    version = document.get("schema_version")
    if version is None:
        raise InvalidManifest("manifest has no schema_version")
    if version != SCHEMA_VERSION:
        raise UnsupportedManifestVersion(
            f"manifest schema_version {version!r} is not supported (this code reads {SCHEMA_VERSION})"
        )
    try:
        manifest = CheckpointManifest.model_validate(document)
    except ValidationError as exc:
        errors = exc.errors()
        missing = [".".join(str(p) for p in e["loc"]) for e in errors if e["type"] == "missing"]
        problems = [f"missing fields {', '.join(missing)}"] if missing else []
        problems += [
            f"{'.'.join(str(p) for p in e['loc']) or 'manifest'}: {e['msg']}"
            for e in errors if e["type"] != "missing"
        ][:3]
        raise InvalidManifest(f"manifest is invalid: {'; '.join(problems)}") from None
    if manifest.delta is not None and manifest.parent is None:
        raise InvalidManifest("manifest names a delta but no parent to apply it to")
    stored = [f.name for f in manifest.shards] + [f.name for f in manifest.tokenizer_files]
    stored += [manifest.delta.name] if manifest.delta is not None else []
    if len(stored) != len(set(stored)):
        raise InvalidManifest("manifest names the same file twice")
    names = [name for shard in manifest.shards for name in shard.tensors]
    if len(names) != len(set(names)):
        raise InvalidManifest("manifest stores the same tensor in two shards")
    dangling = {target for target in manifest.aliases.values() if target not in set(names)}
    if dangling or set(manifest.aliases) & set(names):
        raise InvalidManifest("manifest aliases must point from unstored names to stored tensors")
    return manifest
