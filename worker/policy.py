"""The policy a worker holds and the shape of what turns it into a rollout file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from protocol.runspec import RunSpec
from protocol.submission import SubmissionBinding


@dataclass
class Policy:
    """A loaded policy and where it came from."""

    step: int
    manifest_digest: bytes
    model: object
    tokenizer: object
    folder: Path | None = None
    """The checkpoint's local Hugging Face folder it was loaded from (what a vLLM engine loads), if any."""


class RolloutProducer(Protocol):
    """Makes one rollout file (bytes) and says how many samples it holds; protocol.runspec.UnrunnablePolicy when exact mode
    cannot run the policy."""

    def __call__(self, policy: Policy, spec: RunSpec, binding: SubmissionBinding) -> tuple[bytes, int]: ...
