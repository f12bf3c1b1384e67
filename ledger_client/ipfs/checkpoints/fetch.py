"""Fetch: digest -> manifest -> shards in parallel, each verified before use; resumable; re-provided.

When other fetchers of the same checkpoint are connected (a broadcast after a publish), the blocks
are first brought in one by one in a swarm order (`_prefetch`): the blocks are cut into as many
windows as there are fetchers; each node asks for its own window first — which, at the start,
only the origin holds — and for block j of every other window once it holds j + LAG blocks of
its own, i.e. when that window's owner, progressing at the same pace, most likely holds it. Each
block is its own bitswap session, so it is asked of the first peer that answers it has it: a
peer with a free uplink rather than the origin, whose uplink is busy with the blocks nobody else
has yet. The shards are then read and verified as always, from the node's own blockstore.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from ledger_client.ipfs.checkpoints.delta import apply_delta
from ledger_client.ipfs.checkpoints.errors import (
    DiskFull,
    ManifestNotFound,
    ShardHashMismatch,
    ShardSizeMismatch,
    ShardUnavailable,
)
from ledger_client.ipfs.checkpoints.files import (
    FetchedCheckpoint,
    NoProgress,
    TransferProgress,
    atomic_write,
    check_free_space,
    exclusive_lock,
    sha256_file,
)
from ledger_client.ipfs.checkpoints.load import load_state_dict
from ledger_client.ipfs.checkpoints.publish import encode_shard
from ledger_client.ipfs.checkpoints.retention import PinRetention, RetainedVersion
from ledger_client.ipfs.kubo import KuboClient, KuboContentTooLarge, KuboError, KuboNotFound, KuboUnreachable
from protocol.digest import RAW, cid_codec, cid_to_digest
from protocol.digest import cid_of_reference as manifest_cid_of
from protocol.manifest import (
    CheckpointError,
    CheckpointManifest,
    StoredFile,
    parse_manifest,
)

T = TypeVar("T")


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
    ``store/<manifest cid>/``, verifying every file; resume whatever is already there. When the
    manifest names a delta and ``store`` holds its parent, the shards are rebuilt from the parent
    and the delta and kept only if their sha256 match the manifest; any other case downloads them.

    Raises a :class:`CheckpointError` subclass (or :class:`KuboUnreachable`) and returns
    nothing unless every file matches the manifest.
    """
    started = time.monotonic()
    progress = progress or NoProgress()
    manifest_cid_of(ref)  # a malformed reference is refused before the daemon is asked anything
    received_before = _received_by_peer(kubo)
    manifest_cid, manifest = fetch_manifest(kubo, ref, timeout=timeout)
    origins = _manifest_origin(received_before, _received_by_peer(kubo))
    folder = Path(store) / manifest_cid
    folder.mkdir(parents=True, exist_ok=True)
    files: list[StoredFile] = [*manifest.shards, *manifest.tokenizer_files]
    with exclusive_lock(folder):
        for stale in folder.glob(".*.part"):
            stale.unlink()
        progress.start(manifest.total_bytes, len(files))
        reused = _verified_already(folder, files, parallel, progress)
        missing = [f for f in files if f.name not in reused]
        patched, delta_fallback = _patch_from_parent(kubo, manifest, Path(store), folder, missing, timeout, progress)
        missing = [f for f in missing if f.name not in patched]
        check_free_space(folder, sum(f.size for f in missing))
        position = _swarm_position(kubo, origins)
        credit: dict[str, int] = {}
        prefetched = 0
        if position[1] > 1 and missing:
            credit, prefetched = _prefetch(kubo, missing, position, parallel, timeout, progress)
        retried: dict[str, int] = {}
        stop = threading.Event()

        def fetch_one(stored: StoredFile) -> None:
            if stop.is_set():  # another shard failed or the fetch was interrupted
                return
            try:
                retried_count = _download_verified(kubo, stored, folder, retries, timeout, progress,
                                                   credit.get(stored.name, 0))
                if retried_count:
                    retried[stored.name] = retried_count
                progress.file_done(stored.name)
            except BaseException:
                stop.set()
                raise

        start = _start_offset(position, len(missing))
        with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="shard") as pool:
            futures = [pool.submit(fetch_one, f) for f in [*missing[start:], *missing[:start]]]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                stop.set()  # verified files stay for the next attempt
                raise

        _write_local_metadata(folder, manifest, manifest_cid)
        kept = [*files, *([manifest.delta] if patched and manifest.delta else [])]
        kubo.pin_add(*dict.fromkeys(f.cid for f in kept), manifest_cid, timeout=timeout)  # the manifest last
        if provide:
            _provide_best_effort(kubo, [manifest_cid, *(f.cid for f in kept)])
    if retention is not None:
        retention.record(RetainedVersion(
            step=manifest.step, manifest_cid=manifest_cid, cids=[f.cid for f in kept], path=str(folder)
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
        patched=patched,
        delta_fallback=delta_fallback,
        swarm=position,
        prefetched_blocks=prefetched,
    )


def _patch_from_parent(
    kubo: KuboClient, manifest: CheckpointManifest, store: Path, folder: Path, missing: Sequence[StoredFile],
    timeout: float, progress: TransferProgress,
) -> tuple[list[str], str | None]:
    """Rebuild the missing shards from the parent held in ``store`` and the manifest's delta; returns
    the names rebuilt (each verified against the manifest) and why the rest could not be, if so."""
    shards = [s for s in manifest.shards if s in missing]
    delta = manifest.delta
    if delta is None or not shards or manifest.parent is None:
        return [], None
    parent_folder = store / manifest.parent
    if not (parent_folder / "manifest.json").is_file():
        return [], "the parent checkpoint is not held locally"
    try:
        data = kubo.cat(delta.cid, timeout=timeout)
        if len(data) != delta.size or hashlib.sha256(data).hexdigest() != delta.sha256:
            raise ShardHashMismatch(f"{delta.name}: the bytes received do not match the manifest")
        tensors = apply_delta(data, load_state_dict(parent_folder))
    except KuboUnreachable:
        raise
    except (CheckpointError, KuboError) as exc:
        return [], f"delta unusable: {exc}"
    patched, failed = [], []
    for shard in shards:
        try:
            data = encode_shard({name: tensors[name] for name in shard.tensors})
        except KeyError as exc:
            failed.append(f"{shard.name} (delta lacks {exc})")
            continue
        if len(data) != shard.size or hashlib.sha256(data).hexdigest() != shard.sha256:
            failed.append(shard.name)
            continue
        atomic_write(folder / shard.name, data)
        progress.advance(shard.size)
        progress.file_done(shard.name)
        patched.append(shard.name)
    reason = f"rebuilt shards do not match the manifest: {', '.join(failed)}" if failed else None
    return patched, reason


def _received_by_peer(kubo: KuboClient) -> dict[str, int]:
    """Bytes received so far from each connected peer (empty when the node has no peers or is offline)."""
    try:
        peers = kubo.swarm_peers()
    except KuboUnreachable:
        raise
    except KuboError:
        return {}
    received: dict[str, int] = {}
    for peer in peers:
        try:
            received[peer] = kubo.received_from(peer)
        except KuboUnreachable:
            raise
        except KuboError:  # the peer left meanwhile
            continue
    return received


def _manifest_origin(before: dict[str, int], after: dict[str, int]) -> set[str]:
    """The peer that served this node the most manifest bytes — the origin, which holds the
    checkpoint already and is no fetcher — or nobody when no peer sent anything.

    Only one: bitswap asks every connected peer, so a fetcher that got the manifest a moment
    earlier often serves a duplicate copy too; leaving out every sender would leave a fetcher
    alone in its ranking (no swarm order at all) whenever all its peers answered."""
    sent = {peer: n - before.get(peer, 0) for peer, n in after.items() if n > before.get(peer, 0)}
    if not sent:
        return set()
    return {min(sent, key=lambda peer: (-sent[peer], peer))}


def _swarm_position(kubo: KuboClient, exclude: set[str] | frozenset[str] = frozenset()) -> tuple[int, int]:
    """(rank, count): this node's place among itself and its connected peers, the peers in
    ``exclude`` (the origin) left out — the same ranking on every node of a connected swarm.
    (0, 1) when the node has no peers (or is offline)."""
    try:
        me = kubo.id().peer_id
        ranking = sorted(({me, *kubo.swarm_peers()} - set(exclude)) | {me})
    except KuboUnreachable:
        raise
    except KuboError:
        return 0, 1
    return ranking.index(me), len(ranking)


def _start_offset(position: tuple[int, int], count: int) -> int:
    """Where in the list of missing files this node starts: fetchers of one checkpoint should pull
    different shards first and trade them among themselves, not all ask the origin's uplink for
    the same shards at once. Manifest order for a node alone."""
    rank, size = position
    return rank * count // size if count > 1 else 0


LAG = 4  # own blocks held before block j of another window is asked for: j + LAG


def _prefetch_plan(blocks: Sequence[T], rank: int, size: int, lag: int = LAG) -> tuple[list[T], list[tuple[int, T]]]:
    """Cut ``blocks`` into ``size`` contiguous windows; return this node's window (window ``rank``)
    and every other block with the number of own blocks to hold before asking for it: block j of
    each other window waits for min(j + lag, own window length). The others are listed j by j
    across the windows that follow this node's (in ring order), so all of them trail together."""
    bounds = [w * len(blocks) // size for w in range(size + 1)]
    windows = [list(blocks[bounds[w]:bounds[w + 1]]) for w in range(size)]
    own = windows[rank]
    others = [windows[(rank + k) % size] for k in range(1, size)]
    trailing = [(min(j + lag, len(own)), window[j])
                for j in range(max((len(w) for w in others), default=0))
                for window in others if j < len(window)]
    return own, trailing


def _leaves(kubo: KuboClient, stored: StoredFile, timeout: float) -> list[tuple[str, int]]:
    """The raw blocks of ``stored`` in file order with their sizes (UnixFS with raw leaves, as
    published; a dag-pb node's own data, if any, comes with the node, fetched here)."""
    if cid_codec(stored.cid) == RAW:
        return [(stored.cid, stored.size)]
    found: list[tuple[str, int]] = []

    def walk(cid: str) -> None:  # depth first, in order: a file of more than 174 blocks has inner nodes
        for child, size in kubo.links(cid, timeout=timeout):
            if cid_codec(child) == RAW:
                found.append((child, size))
            else:
                walk(child)

    walk(stored.cid)
    return found


def _prefetch(kubo: KuboClient, files: Sequence[StoredFile], position: tuple[int, int], parallel: int,
              timeout: float, progress: TransferProgress) -> tuple[dict[str, int], int]:
    """Bring the blocks of ``files`` into the node's blockstore in the swarm order (module
    docstring), ``parallel`` blocks at a time for the own window and as many for the others.
    Returns the bytes brought in per file name (already reported to ``progress``) and the number
    of blocks. Best effort: on the first error other than an unreachable daemon it stops, and
    the shards' own download fetches (and reports) whatever is missing."""
    rank, size = position
    try:
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            per_file = list(pool.map(lambda f: [(f.name, *leaf) for leaf in _leaves(kubo, f, timeout)], files))
    except KuboUnreachable:
        raise
    except KuboError:
        return {}, 0
    own, trailing = _prefetch_plan([leaf for leaves in per_file for leaf in leaves], rank, size)
    credit: dict[str, int] = {}
    blocks = own_done = 0
    stopped = False
    changed = threading.Condition()

    def stop() -> None:
        nonlocal stopped
        with changed:
            stopped = True
            changed.notify_all()

    def get(name: str, cid: str, _size: int) -> None:
        nonlocal blocks
        if stopped:
            return
        try:
            size = kubo.fetch_block(cid, timeout=timeout)
        except BaseException:
            stop()
            raise
        progress.advance(size)
        with changed:
            credit[name] = credit.get(name, 0) + size
            blocks += 1

    def own_one(leaf: tuple[str, str, int]) -> None:
        nonlocal own_done
        try:
            get(*leaf)
        finally:
            with changed:
                own_done += 1
                changed.notify_all()

    def trail_one(gate: int, leaf: tuple[str, str, int]) -> None:
        with changed:
            changed.wait_for(lambda: own_done >= gate or stopped)
        get(*leaf)

    with ThreadPoolExecutor(max(1, parallel), "own") as own_pool, \
            ThreadPoolExecutor(max(1, parallel), "trail") as trail_pool:
        futures = [own_pool.submit(own_one, leaf) for leaf in own]
        futures += [trail_pool.submit(trail_one, gate, leaf) for gate, leaf in trailing]
        try:
            for future in futures:
                future.result()
        except KuboUnreachable:
            raise
        except KuboError:
            pass  # the shards' download takes over
        finally:
            stop()  # the queued blocks are skipped, the waiting ones released
    return credit, blocks


def _verified_already(
    folder: Path, files: Sequence[StoredFile], parallel: int, progress: TransferProgress
) -> set[str]:
    """Names of files already in ``folder`` that match the manifest; others are deleted."""

    def check(stored: StoredFile) -> str | None:
        path = folder / stored.name
        if not path.exists():
            return None
        if path.stat().st_size == stored.size and sha256_file(path) == stored.sha256:
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
    credit: int = 0,
) -> int:
    """Download one file, check size and sha256 before it takes its final name; retry on a
    bad or unavailable copy. Returns how many retries it took. The first ``credit`` bytes were
    reported to ``progress`` already (brought into the node by the prefetch)."""
    last_error: CheckpointError | None = None
    for attempt in range(retries + 1):
        received = 0

        def count(n: int) -> None:
            nonlocal received
            progress.advance(max(0, received + n - credit) - max(0, received - credit))
            received += n

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
        progress.advance(-max(0, received - credit))
    assert last_error is not None
    raise type(last_error)(f"{last_error} (after {retries + 1} attempts)")


def _write_local_metadata(folder: Path, manifest: CheckpointManifest, manifest_cid: str) -> None:
    """Make the folder a Hugging Face model folder and keep the manifest next to the shards."""
    atomic_write(folder / "manifest.json", manifest.to_bytes())
    weight_map = {name: shard.name for shard in manifest.shards for name in shard.tensors}
    index = {"metadata": {"total_size": sum(s.size for s in manifest.shards), "manifest_cid": manifest_cid},
             "weight_map": weight_map}
    atomic_write(folder / "model.safetensors.index.json", json.dumps(index, indent=1).encode())
    if manifest.config is not None:
        atomic_write(folder / "config.json", json.dumps(manifest.config, indent=1).encode())


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
