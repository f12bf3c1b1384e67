"""Publishing each new policy: safetensors shards and a manifest on IPFS, the digest on-chain."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import torch
from transformers import PretrainedConfig, PreTrainedTokenizerBase

from inference.backend import InferenceError
from inference.exact import quantise_policy
from ledger_client.chain.errors import LedgerError
from ledger_client.chain.ledger import Ledger
from ledger_client.chain.queries import pool_state
from ledger_client.ipfs.checkpoints import (
    PinRetention,
    fetch_checkpoint,
    fetch_manifest,
    load_state_dict,
    manifest_cid_of,
    publish_checkpoint,
)
from ledger_client.ipfs.content import put_object
from ledger_client.ipfs.kubo import KuboClient
from protocol.digest import digest_to_cid, hex_text
from protocol.manifest import PolicyVerification
from protocol.pool import versions_to_keep
from protocol.runspec import RunSpec


class IpfsPublisher:
    """A trainer publisher hook: `publisher(step, state_dict)`.

    Step 0 is the pool's base checkpoint, fixed when the pool was created and already on IPFS
    (the trainer starts from it), so it is not published again. Later steps are published with
    `publishCheckpoint`. The node keeps the newest `versions_to_keep(async_level)` versions pinned.

    With `metrics_of(step)` the step's metrics line (reward, accuracy, clipped fraction, staleness,
    ...) goes to IPFS as a small JSON object named by the manifest's `metrics` field, so anyone can
    draw the learning curve from the chain and IPFS alone. Those objects stay pinned (they are tiny
    and make the whole curve).

    A policy also goes out as a sparse patch against its parent (the manifest's `delta`) when that patch is
    at most half its shards (`DELTA_WORTH_FRACTION`: a bf16 step, not a float32 one); the parent's tensors
    are the ones published last, or — after a restart — fetched back from IPFS, so a re-published step gets
    the same patch and manifest. `patch_ratios[step]` is patch bytes over shard bytes (no entry: no patch).

    With `policy_verification()` each new policy's manifest carries the tolerances it returns (recalibrated on a
    recent policy: protocol.manifest.PolicyVerification); a step the chain already has is re-published with the
    tolerances its on-chain manifest carries, so a restart never changes a published digest.
    """

    def __init__(self, ledger: Ledger, kubo: KuboClient, pool_id: int, model_config: PretrainedConfig,
                 tokenizer: PreTrainedTokenizerBase, async_level: int, state_dir: Path,
                 metrics_of: Callable[[int], dict | None] | None = None,
                 policy_verification: Callable[[], PolicyVerification | None] | None = None):
        self.ledger = ledger
        self.kubo = kubo
        self.pool_id = pool_id
        self.config = manifest_config(model_config)
        self.tokenizer_dir = Path(tempfile.mkdtemp(prefix="proofswarm-tokenizer-"))
        self.tokenizer_files = tokenizer_files(tokenizer, self.tokenizer_dir)
        self.retention = PinRetention(kubo, Path(state_dir) / "published-pins.json", keep=versions_to_keep(async_level))
        base = bytes(ledger.pool.checkpoint_at(pool_id, 0))
        self.published: dict[int, str] = {0: hex_text(base)}
        self.metrics_of = metrics_of
        self.policy_verification = policy_verification
        self.state_dir = Path(state_dir)
        self.patch_ratios: dict[int, float] = {}
        self._last: tuple[str, dict[str, torch.Tensor]] | None = None  # (manifest CID, tensors) published last

    def __call__(self, step: int, state_dict: dict[str, torch.Tensor]) -> str:
        if step == 0:
            return self.published[0]
        parent = self._parent(step)
        published = publish_checkpoint(self.kubo, state_dict, step=step, parent=parent, config=self.config,
                                       tokenizer_files=self.tokenizer_files, on_chain=self._publish_on_chain,
                                       retention=self.retention, metrics=self._put_metrics(step),
                                       parent_state=self._tensors_of(parent),
                                       verification=self._verification(step))
        self.published[step] = hex_text(published.digest)
        if published.patch_ratio is not None:
            self.patch_ratios[step] = published.patch_ratio
        self._last = (published.manifest_cid, state_dict)
        return self.published[step]

    def _tensors_of(self, manifest_cid: str) -> dict[str, torch.Tensor]:
        """The tensors of a published policy: the last one published, or fetched back (after a restart,
        and for the base checkpoint) into <state_dir>/parent, which holds only that one."""
        if self._last is not None and self._last[0] == manifest_cid:
            return self._last[1]
        folder = self.state_dir / "parent"
        if folder.exists():
            for other in folder.iterdir():
                if other.name != manifest_cid:
                    shutil.rmtree(other, ignore_errors=True)
        return load_state_dict(fetch_checkpoint(self.kubo, manifest_cid, folder, provide=False))

    def _verification(self, step: int) -> PolicyVerification | None:
        """The tolerances step's manifest carries: those already on-chain for a re-published step, else the
        current `policy_verification()`."""
        if self.policy_verification is None:
            return None
        on_chain = bytes(self.ledger.pool.checkpoint_at(self.pool_id, step))
        if on_chain != bytes(32):
            return fetch_manifest(self.kubo, on_chain)[1].verification
        return self.policy_verification()

    def _put_metrics(self, step: int) -> str | None:
        metrics = self.metrics_of(step) if self.metrics_of is not None else None
        if metrics is None:
            return None
        return digest_to_cid(put_object(self.kubo, metrics_bytes(metrics)))

    def _parent(self, step: int) -> str:
        """Manifest CID of step − 1's on-chain checkpoint (steps are contiguous on-chain; read from the
        chain, so a restarted trainer re-publishing a step produces the very same manifest)."""
        digest = bytes(self.ledger.pool.checkpoint_at(self.pool_id, step - 1))
        if digest == bytes(32):
            raise LedgerError(f"pool {self.pool_id} has no checkpoint at step {step - 1}, the parent of step {step}")
        return manifest_cid_of(digest)

    def _publish_on_chain(self, step: int, digest: bytes) -> None:
        latest = pool_state(self.ledger, self.pool_id).latest_step
        if step <= latest:  # a restarted trainer re-publishing a step the chain already has
            if bytes(self.ledger.pool.checkpoint_at(self.pool_id, step)) != digest:
                raise LedgerError(f"step {step} is already on-chain with another digest; the trainer state and "
                                  f"the chain disagree")
            return
        if step != latest + 1:  # the contract takes only the next step
            raise LedgerError(f"cannot publish step {step}: the chain is at step {latest} and steps are contiguous")
        self.ledger.pool.publish_checkpoint(self.pool_id, step, digest)


def exact_policy_problem(spec: RunSpec, model: torch.nn.Module) -> str | None:
    """Why an exact pool (`spec.inference`) cannot run `model`: what every party's quantisation of it refuses (a
    family other than Llama/Qwen2, another RoPE or activation, a weight past exact mode's bounds: docs/protocol.md
    R5.5); None when it would quantise, or the pool is a float one. Checked before any of the pool's policies is
    published (`trainer init`, and `trainer start` before every step)."""
    return quantise_problem(model) if spec.inference == "exact" else None


def quantise_problem(model: torch.nn.Module) -> str | None:
    """Why exact mode cannot quantise `model` (inference.exact.quantise_policy's refusal); None when it can."""
    try:
        quantise_policy(model)
    except InferenceError as exc:
        return str(exc)
    return None


def base_checkpoint_digest(kubo: KuboClient, state_dict: dict[str, torch.Tensor], model_config: PretrainedConfig,
                           tokenizer: PreTrainedTokenizerBase) -> bytes:
    """Add the initial policy to IPFS and return the digest a pool uses as its base checkpoint."""
    with tempfile.TemporaryDirectory() as tmp:
        return publish_checkpoint(kubo, state_dict, step=0, config=manifest_config(model_config),
                                  tokenizer_files=tokenizer_files(tokenizer, Path(tmp))).digest


def manifest_config(model_config: PretrainedConfig) -> dict:
    """The model config as it goes into a manifest: without the local path it was loaded from,
    so the same weights give the same manifest (and digest) wherever they are published."""
    config = model_config.to_dict()
    config.pop("_name_or_path", None)
    return config


def tokenizer_files(tokenizer: PreTrainedTokenizerBase, folder: Path) -> list[Path]:
    """Save the tokenizer into `folder`; the files a manifest carries."""
    return sorted(Path(p) for p in tokenizer.save_pretrained(folder) if Path(p).is_file())


def metrics_bytes(metrics: dict) -> bytes:
    """Canonical JSON of a metrics line (sorted keys; NaN/inf become null, which JSON lacks), so a
    re-published step yields the same object and manifest."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
    return json.dumps(clean, sort_keys=True, separators=(",", ":")).encode()
