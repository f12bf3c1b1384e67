"""A policy store in a local folder: how a trainer hands checkpoints to workers on the same
machine (the IPFS checkpoint path does the same across machines).

Layout: `<root>/step_000012/` holds a Hugging Face `save_pretrained` folder (config.json,
model.safetensors, tokenizer files); `<root>/latest.json` names the newest step and its
digest. Every folder is written under a temporary name and renamed, and `latest.json`
is replaced atomically, so a reader never sees a half-written policy.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch
from pydantic import BaseModel, Field
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from inference.policy import is_tied_output
from protocol.digest import Digest

LATEST = "latest.json"
DONE_MARKER = "trainer.done"  # in the run folder: the trainer has finished, workers stop


class PolicyStoreError(Exception):
    """The store holds no policy, or a policy that cannot be read."""


class PolicyPointer(BaseModel):
    """The newest published policy: its step and the sha256 of its weights file."""

    step: int = Field(ge=0)
    digest: Digest


def _write_json_atomic(path: Path, payload: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(payload)
    os.replace(tmp, path)


def step_dir(root: Path, step: int) -> Path:
    return root / f"step_{step:06d}"


class LocalPolicyStore:
    """Publishes `(step, state_dict)` as loadable checkpoints and keeps the newest `keep`."""

    def __init__(
        self, root: str | Path, model_config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase, keep: int = 4
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.model_config = model_config
        self.tokenizer = tokenizer
        self.keep = keep

    def publish(self, step: int, state_dict: dict[str, torch.Tensor]) -> Digest:
        """Write the policy of `step`, point latest.json at it, return its digest."""
        hf_logging.disable_progress_bar()  # one bar per published step would drown the logs
        final = step_dir(self.root, step)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=f".{final.name}."))
        model = AutoModelForCausalLM.from_config(self.model_config)
        model.load_state_dict(state_dict)
        model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        digest = Digest.of((tmp / "model.safetensors").read_bytes())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _write_json_atomic(self.root / LATEST, PolicyPointer(step=step, digest=digest).model_dump_json())
        for old in sorted(self.root.glob("step_*"))[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return digest

    __call__ = publish


def latest_policy(root: str | Path) -> PolicyPointer | None:
    """The newest published policy, or None when nothing is published yet."""
    path = Path(root) / LATEST
    try:
        return PolicyPointer.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise PolicyStoreError(f"unreadable {path}: {exc}") from exc


def load_local_policy(root: str | Path, step: int) -> PreTrainedModel:
    """Load the policy of `step` in eval mode."""
    folder = step_dir(Path(root), step)
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(folder)
    except OSError as exc:
        raise PolicyStoreError(f"cannot load policy step {step} from {folder}: {exc}") from exc
    model.eval()
    return model


PROGRESS = "trainer_progress.json"


class TrainerProgress(BaseModel):
    """What a local trainer tells local workers so they can pace themselves: its step,
    how many rollout files it has taken in, and whether it is waiting for more."""

    step: int = Field(ge=0)
    consumed: int = Field(ge=0)
    waiting: bool
    files_per_step: float = Field(1.0, ge=0, description="files the trainer has needed per step so far")


def write_progress(folder: str | Path, progress: TrainerProgress) -> None:
    """Replace the progress file in `folder` atomically."""
    _write_json_atomic(Path(folder) / PROGRESS, progress.model_dump_json())


def load_policy_weights(root: str | Path, step: int, model: PreTrainedModel) -> None:
    """Replace `model`'s weights with those of `step` (same architecture): much cheaper
    than `load_policy` for a worker that follows every step."""
    path = step_dir(Path(root), step) / "model.safetensors"
    try:
        weights = load_file(path)
        # a tied model saves its embedding once; the LM head shares that tensor, so it needs no key
        tied = {key for key in model.state_dict() if key not in weights and is_tied_output(model, key)}
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if set(missing) - tied or unexpected:
            raise RuntimeError(f"missing {sorted(set(missing) - tied)}, unexpected {sorted(unexpected)}")
    except (OSError, RuntimeError) as exc:
        raise PolicyStoreError(f"cannot load policy step {step} weights from {path}: {exc}") from exc


def read_progress(folder: str | Path) -> TrainerProgress | None:
    """The trainer's last progress report, or None before its first one."""
    try:
        return TrainerProgress.model_validate_json((Path(folder) / PROGRESS).read_text())
    except FileNotFoundError:
        return None
