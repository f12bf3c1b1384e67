"""What `checkpoint publish | fetch` do (deploy/checkpoint_cli.py parses their command lines): rich progress bars,
the Kubo client and the checkpoint codec, loaded only once the arguments have been checked."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from cli.devnet import load_devnet_info
from cli.output import progress_lines
from ledger_client.ipfs.checkpoints import (
    InvalidCheckpointSource,
    ManifestNotFound,
    PinRetention,
    TransferProgress,
    fetch_checkpoint,
    manifest_cid_of,
    publish_checkpoint,
)
from ledger_client.ipfs.kubo import DEFAULT_API, KuboClient, KuboError, KuboNotFound, KuboTimeout, KuboUnreachable
from protocol.digest import hex_text


class RichTransferProgress:
    """A rich progress bar with bytes, bytes/s and files done/total, shown from `start` (a fetch that fails before
    its manifest is read leaves no empty bar behind) until `close`."""

    def __init__(self, label: str) -> None:
        self._progress: Progress | None = None
        self._label = label
        self._task: TaskID | None = None
        self._files_done = 0
        self._files_total = 0

    def start(self, total_bytes: int, total_files: int) -> None:
        self._files_total = total_files
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(),
            TextColumn("files {task.fields[files]}"), TimeRemainingColumn(),
            console=Console(stderr=True), transient=False)
        self._progress.start()
        self._task = self._progress.add_task(self._label, total=total_bytes, files=f"0/{total_files}")

    def advance(self, n_bytes: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n_bytes)

    def file_done(self, name: str) -> None:
        self._files_done += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, files=f"{self._files_done}/{self._files_total}")

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextmanager
def _progress_for(args: argparse.Namespace, label: str) -> Iterator[TransferProgress | None]:
    if args.quiet or args.json:
        yield None
        return
    bar = RichTransferProgress(label)
    try:
        yield bar
    finally:
        bar.close()


def _load_source(path: Path) -> Any:
    """A model folder as a Path, or a single weights file as a state dict."""
    if path.is_dir():
        return path
    if not path.is_file():
        raise InvalidCheckpointSource(f"{path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(path)
        except Exception as exc:  # safetensors raises its own error type
            raise InvalidCheckpointSource(f"{path} is not a safetensors file: {exc}") from None
    if path.suffix in (".pt", ".pth", ".bin"):
        import torch

        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # torch raises many types for a bad file
            raise InvalidCheckpointSource(f"{path} is not a torch state dict: {exc}") from None
        if not isinstance(state, dict):
            raise InvalidCheckpointSource(f"{path} holds a {type(state).__name__}, not a state dict")
        return state
    raise InvalidCheckpointSource(f"{path}: give a model folder, a .safetensors or a .pt file")


def _retention(kubo: KuboClient, args: argparse.Namespace) -> PinRetention | None:
    return PinRetention(kubo, args.pins, keep=args.keep) if args.pins else None


def publish(args: argparse.Namespace) -> int:
    source = _load_source(args.source)
    with KuboClient(_kubo_api(args), timeout=args.timeout) as kubo, _progress_for(args, "publish") as progress:
        result = publish_checkpoint(
            kubo, source, step=args.step, parent=args.parent, shard_bytes=int(args.shard_mib * 2**20),
            retention=_retention(kubo, args), progress=progress,
        )
    summary = {
        "step": result.manifest.step,
        "manifest_cid": result.manifest_cid,
        "digest": hex_text(result.digest),
        "shards": len(result.manifest.shards),
        "bytes": result.manifest.total_bytes,
        "seconds": round(result.seconds, 3),
    }
    _report(args, summary, quiet_value=summary["digest"])
    return 0


class _Started:
    """A TransferProgress that notes whether the fetch got past its manifest (then `start` is called)."""

    def __init__(self, inner: TransferProgress | None) -> None:
        self.inner = inner
        self.started = False

    def start(self, total_bytes: int, total_files: int) -> None:
        self.started = True
        if self.inner is not None:
            self.inner.start(total_bytes, total_files)

    def advance(self, n_bytes: int) -> None:
        if self.inner is not None:
            self.inner.advance(n_bytes)

    def file_done(self, name: str) -> None:
        if self.inner is not None:
            self.inner.file_done(name)


def fetch(args: argparse.Namespace) -> int:
    say = progress_lines("checkpoint fetch", quiet=args.quiet or args.json)
    manifest_cid = manifest_cid_of(args.ref)  # a malformed reference: refused before Kubo is asked anything
    api = _kubo_api(args)
    with KuboClient(api, timeout=args.timeout) as kubo:
        asked = f"the Kubo node at {api}"
        try:
            peers = len(kubo.swarm_peers())
            asked += f" and its {peers} connected peer{'' if peers == 1 else 's'}"
        except KuboUnreachable:
            raise
        except KuboError:  # an offline node has no swarm: it answers from its own store only
            asked += " (offline: its own store only)"
        say(f"asking {asked} for manifest {manifest_cid} (up to {args.timeout:g} s)")
        with _progress_for(args, "fetch") as progress:
            stage = _Started(progress)
            try:
                result = fetch_checkpoint(
                    kubo, args.ref, args.store, parallel=args.parallel, retries=args.retries, timeout=args.timeout,
                    retention=_retention(kubo, args), progress=stage,
                )
            except (ManifestNotFound, KuboNotFound, KuboTimeout):
                if stage.started:
                    raise
                raise ManifestNotFound(f"no manifest {manifest_cid} within {args.timeout:g} s: {asked} did not serve "
                                       "it; is the publisher's Kubo node up and connected?") from None
    summary = {
        "step": result.manifest.step,
        "manifest_cid": result.manifest_cid,
        "digest": hex_text(result.digest),
        "path": str(result.path),
        "downloaded": len(result.downloaded),
        "reused": len(result.reused),
        "retried": result.retried,
        "bytes": result.manifest.total_bytes,
        "seconds": round(result.seconds, 3),
    }
    _report(args, summary, quiet_value=summary["path"])
    return 0


def _report(args: argparse.Namespace, summary: dict[str, Any], quiet_value: str) -> None:
    if args.json:
        print(json.dumps(summary))
    elif args.quiet:
        print(quiet_value)
    else:
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            print(f"{key:<{width}}  {value}")


def _kubo_api(args: argparse.Namespace) -> str:
    """--kubo-api, else $PROOFSWARM_KUBO_API, else the running devnet's daemon, else Kubo's default port."""
    return (args.kubo_api or os.environ.get("PROOFSWARM_KUBO_API") or (load_devnet_info() or {}).get("kubo_api")
            or DEFAULT_API)
