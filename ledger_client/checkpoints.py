"""Policy checkpoints over IPFS: sharded safetensors, a manifest, per-shard verification.

Publish (trainer): state dict or Hugging Face model folder -> safetensors shards of
``shard_bytes`` each (a bigger tensor gets a shard of its own) -> each added to Kubo and pinned
-> manifest (ledger_client/checkpoint_manifest.py) added as one raw block -> ``on_chain(step,
digest)`` (wired to ``publishCheckpoint``) -> older versions unpinned.

Fetch (workers, validators): digest -> manifest -> shards in parallel into a local folder, each
hashed while it streams and checked against the manifest before it is renamed into place; a bad
shard is fetched again; files already present are re-verified and kept, so an interrupted fetch
resumes. The folder is also a valid Hugging Face model folder (config.json, tokenizer files,
model.safetensors.index.json). Everything fetched is pinned and provided by the local node, so
every worker serves the checkpoint to the others.

Load: :func:`load_state_dict` memory-maps the verified shards (no copy of the weights in RAM);
:func:`load_into` assigns those tensors as the model's parameters.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

import torch
from pydantic import BaseModel, ConfigDict
from safetensors.torch import load_file as _mmap_safetensors
from safetensors.torch import save as _safetensors_bytes

from ledger_client.checkpoint_manifest import (
    SCHEMA_VERSION,
    CheckpointError,
    CheckpointManifest,
    Shard,
    StoredFile,
    parse_manifest,
)
from ledger_client.cid import RAW, cid_codec, cid_to_digest, digest_to_cid, parse_digest
from ledger_client.kubo import KuboClient, KuboContentTooLarge, KuboError, KuboNotFound, KuboUnreachable

DEFAULT_SHARD_BYTES: Final = 256 << 20
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
_HASH_BLOCK = 8 << 20


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


class TransferProgress(Protocol):
    """Receives progress of a publish or fetch (called from several threads)."""

    def start(self, total_bytes: int, total_files: int) -> None: ...

    def advance(self, n_bytes: int) -> None: ...

    def file_done(self, name: str) -> None: ...


class _NoProgress:
    def start(self, total_bytes: int, total_files: int) -> None:
        pass

    def advance(self, n_bytes: int) -> None:
        pass

    def file_done(self, name: str) -> None:
        pass


OnChain = Callable[[int, bytes], None]


@dataclass(frozen=True)
class PublishedCheckpoint:
    """What :func:`publish_checkpoint` produced."""

    manifest: CheckpointManifest
    manifest_cid: str
    digest: bytes
    seconds: float


@dataclass(frozen=True)
class FetchedCheckpoint:
    """A verified local copy of a checkpoint."""

    manifest: CheckpointManifest
    manifest_cid: str
    digest: bytes
    path: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    retried: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


# -- pin retention ------------------------------------------------------------------------------


class RetainedVersion(BaseModel):
    """One checkpoint version this node keeps pinned."""

    model_config = ConfigDict(extra="forbid")

    step: int
    manifest_cid: str
    cids: list[str]
    path: str | None = None


class _RetentionState(BaseModel):
    versions: list[RetainedVersion] = []


class PinRetention:
    """Keeps the newest ``keep`` (``async_level + 1``) checkpoint versions pinned on a Kubo node
    and unpins (and deletes the local folders of) older ones. Its ledger is a JSON file."""

    def __init__(self, kubo: KuboClient, state_file: Path, keep: int) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.kubo = kubo
        self.state_file = Path(state_file)
        self.keep = keep

    def versions(self) -> list[RetainedVersion]:
        """Retained versions, newest first."""
        if not self.state_file.exists():
            return []
        return _RetentionState.model_validate_json(self.state_file.read_text()).versions

    def record(self, version: RetainedVersion) -> list[RetainedVersion]:
        """Add ``version``; unpin what falls out of the newest ``keep``; return what was dropped.

        A CID that a kept version still uses (an unchanged shard) stays pinned."""
        versions = [v for v in self.versions() if v.manifest_cid != version.manifest_cid]
        versions = sorted([version, *versions], key=lambda v: v.step, reverse=True)
        kept, dropped = versions[: self.keep], versions[self.keep :]
        still_used = {cid for v in kept for cid in [v.manifest_cid, *v.cids]}
        for old in dropped:
            for cid in [old.manifest_cid, *old.cids]:
                if cid not in still_used:
                    self.kubo.pin_rm(cid)
            if old.path and all(old.path != v.path for v in kept):
                shutil.rmtree(old.path, ignore_errors=True)
        _atomic_write(self.state_file, _RetentionState(versions=kept).model_dump_json(indent=1).encode())
        return dropped


# -- publish ------------------------------------------------------------------------------------


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
) -> PublishedCheckpoint:
    """Shard ``source`` (a state dict, or a Hugging Face model folder whose config and
    tokenizer files are taken along), add everything to Kubo pinned, add the manifest (naming
    ``metrics``, the CID of the step's metrics object, if given), call ``on_chain(step, digest)``,
    then let ``retention`` unpin versions that fell out."""
    started = time.monotonic()
    progress = progress or _NoProgress()
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
        data = _safetensors_bytes({n: stored[n] for n in names}, metadata={"format": "pt"})
        cid = kubo.add_bytes(data)
        shards.append(Shard(name=file_name, cid=cid, sha256=hashlib.sha256(data).hexdigest(),
                            size=len(data), tensors=names))
        progress.advance(sum(stored[n].numel() * stored[n].element_size() for n in names))
        progress.file_done(file_name)
        del data
    extra: list[StoredFile] = []
    for path in tokenizer_paths:
        cid = kubo.add_file(path)
        extra.append(StoredFile(name=path.name, cid=cid, sha256=_sha256_file(path), size=path.stat().st_size))
        progress.advance(path.stat().st_size)
        progress.file_done(path.name)

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
            step=step, manifest_cid=manifest_cid, cids=[f.cid for f in [*shards, *extra]]
        ))
    return PublishedCheckpoint(manifest, manifest_cid, digest, time.monotonic() - started)


# -- fetch --------------------------------------------------------------------------------------


def manifest_cid_of(ref: bytes | str) -> str:
    """The manifest CID for an on-chain digest (bytes or hex) or a CID string."""
    if isinstance(ref, str) and not ref.startswith("0x") and len(ref) != 64:
        cid_to_digest(ref)  # validates
        return ref
    return digest_to_cid(parse_digest(ref), RAW)


def fetch_manifest(kubo: KuboClient, ref: bytes | str, *, timeout: float = 60.0) -> tuple[str, CheckpointManifest]:
    """Retrieve and validate the manifest behind ``ref``; return (manifest CID, manifest)."""
    manifest_cid = manifest_cid_of(ref)
    try:
        data = kubo.cat(manifest_cid, timeout=timeout)
    except KuboNotFound:
        raise ManifestNotFound(
            f"no manifest behind digest 0x{cid_to_digest(manifest_cid).hex()}: no reachable peer has {manifest_cid}"
        ) from None
    if cid_codec(manifest_cid) == RAW and hashlib.sha256(data).digest() != cid_to_digest(manifest_cid):
        raise ManifestNotFound(f"content returned for {manifest_cid} does not match its digest")
    return manifest_cid, parse_manifest(data)


def fetch_checkpoint(
    kubo: KuboClient,
    ref: bytes | str,
    store: Path,
    *,
    parallel: int = 4,
    retries: int = 2,
    timeout: float = 120.0,
    retention: PinRetention | None = None,
    progress: TransferProgress | None = None,
    provide: bool = True,
) -> FetchedCheckpoint:
    """Fetch the checkpoint behind ``ref`` (on-chain digest or manifest CID) into
    ``store/<manifest cid>/``, verifying every file; resume whatever is already there.

    Raises a :class:`CheckpointError` subclass (or :class:`KuboUnreachable`) and returns
    nothing unless every file matches the manifest.
    """
    started = time.monotonic()
    progress = progress or _NoProgress()
    manifest_cid, manifest = fetch_manifest(kubo, ref, timeout=timeout)
    folder = Path(store) / manifest_cid
    folder.mkdir(parents=True, exist_ok=True)
    files: list[StoredFile] = [*manifest.shards, *manifest.tokenizer_files]
    with _exclusive(folder):
        for stale in folder.glob(".*.part"):
            stale.unlink()
        progress.start(manifest.total_bytes, len(files))
        reused = _verified_already(folder, files, parallel, progress)
        missing = [f for f in files if f.name not in reused]
        _check_free_space(folder, sum(f.size for f in missing))
        retried: dict[str, int] = {}
        stop = threading.Event()

        def fetch_one(stored: StoredFile) -> None:
            if stop.is_set():  # another shard failed or the fetch was interrupted
                return
            try:
                retried_count = _download_verified(kubo, stored, folder, retries, timeout, progress)
                if retried_count:
                    retried[stored.name] = retried_count
                progress.file_done(stored.name)
            except BaseException:
                stop.set()
                raise

        with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="shard") as pool:
            futures = [pool.submit(fetch_one, f) for f in missing]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                stop.set()  # verified files stay for the next attempt
                raise

        _write_local_metadata(folder, manifest, manifest_cid)
        for stored in files:
            kubo.pin_add(stored.cid, timeout=timeout)
        kubo.pin_add(manifest_cid, timeout=timeout)
        if provide:
            _provide_best_effort(kubo, [manifest_cid, *(f.cid for f in files)])
    if retention is not None:
        retention.record(RetainedVersion(
            step=manifest.step, manifest_cid=manifest_cid, cids=[f.cid for f in files], path=str(folder)
        ))
    return FetchedCheckpoint(
        manifest=manifest,
        manifest_cid=manifest_cid,
        digest=cid_to_digest(manifest_cid),
        path=folder,
        downloaded=[f.name for f in missing],
        reused=sorted(reused),
        retried=retried,
        seconds=time.monotonic() - started,
    )


def _verified_already(
    folder: Path, files: Sequence[StoredFile], parallel: int, progress: TransferProgress
) -> set[str]:
    """Names of files already in ``folder`` that match the manifest; others are deleted."""

    def check(stored: StoredFile) -> str | None:
        path = folder / stored.name
        if not path.exists():
            return None
        if path.stat().st_size == stored.size and _sha256_file(path) == stored.sha256:
            progress.advance(stored.size)
            progress.file_done(stored.name)
            return stored.name
        path.unlink()
        return None

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return {name for name in pool.map(check, files) if name}


def _download_verified(
    kubo: KuboClient,
    stored: StoredFile,
    folder: Path,
    retries: int,
    timeout: float,
    progress: TransferProgress,
) -> int:
    """Download one file, check size and sha256 before it takes its final name; retry on a
    bad or unavailable copy. Returns how many retries it took."""
    last_error: CheckpointError | None = None
    for attempt in range(retries + 1):
        received = 0

        def count(n: int) -> None:
            nonlocal received
            received += n
            progress.advance(n)

        staging = folder / f".{stored.name}.part"
        try:
            sha = kubo.cat_to_file(stored.cid, staging, timeout=timeout, on_bytes=count,
                                   max_bytes=stored.size)
        except KuboUnreachable:
            raise
        except KuboNotFound:
            last_error = ShardUnavailable(f"{stored.name} ({stored.cid}): no reachable peer provided it")
        except KuboContentTooLarge:
            last_error = ShardSizeMismatch(f"{stored.name}: more than the manifest's {stored.size} bytes")
        except KuboError as exc:
            last_error = ShardUnavailable(f"{stored.name} ({stored.cid}): {exc}")
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFull(f"disk full writing {stored.name} to {folder}") from None
            raise
        else:
            size = staging.stat().st_size
            if size != stored.size:
                last_error = ShardSizeMismatch(f"{stored.name}: {size} bytes, manifest says {stored.size}")
            elif sha != stored.sha256:
                last_error = ShardHashMismatch(f"{stored.name}: sha256 {sha[:16]}… != manifest {stored.sha256[:16]}…")
            else:
                os.replace(staging, folder / stored.name)
                return attempt
        staging.unlink(missing_ok=True)
        progress.advance(-received)
    assert last_error is not None
    raise type(last_error)(f"{last_error} (after {retries + 1} attempts)")


def _write_local_metadata(folder: Path, manifest: CheckpointManifest, manifest_cid: str) -> None:
    """Make the folder a Hugging Face model folder and keep the manifest next to the shards."""
    _atomic_write(folder / "manifest.json", manifest.to_bytes())
    weight_map = {name: shard.name for shard in manifest.shards for name in shard.tensors}
    index = {"metadata": {"total_size": sum(s.size for s in manifest.shards), "manifest_cid": manifest_cid},
             "weight_map": weight_map}
    _atomic_write(folder / "model.safetensors.index.json", json.dumps(index, indent=1).encode())
    if manifest.config is not None:
        _atomic_write(folder / "config.json", json.dumps(manifest.config, indent=1).encode())


def _provide_best_effort(kubo: KuboClient, cids: Sequence[str]) -> None:
    # Bitswap already serves every held block to connected peers; announcing to the DHT only
    # helps peers that are not connected yet, so a node without DHT peers skips it. Roots are
    # enough: a peer that finds us by a root asks us for the rest of that tree (and Kubo's
    # reprovider announces every block later anyway). Recursive provides cost ~20% of a fetch.
    for cid in cids:
        try:
            kubo.provide(cid, recursive=False)
        except KuboUnreachable:
            raise
        except KuboError:
            return


# -- load ---------------------------------------------------------------------------------------


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


def _sha256_file(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(_HASH_BLOCK):
            hasher.update(chunk)
    return hasher.hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise DiskFull(f"disk full writing {path}") from None
        raise


def _check_free_space(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise DiskFull(f"need {needed / 2**20:.1f} MiB in {folder}, only {free / 2**20:.1f} MiB free")


@contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """One fetcher per checkpoint folder at a time (a second one waits)."""
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
