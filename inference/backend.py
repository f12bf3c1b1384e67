"""The backend-neutral inference interface shared by the worker (generate) and the
validator (prefill).

Position convention: the hidden state "of generated token i" is the final hidden state (the LM
head's input) at the position whose logits token i was sampled from, i.e. the position of the
token just before it (the last prompt token for i = 0). It is what the sampler saw, and it is
exactly what `prefill(prompt, completion)` recomputes in one pass over
prompt + completion[:-1].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from protocol.runspec import SamplingSpec


class InferenceError(RuntimeError):
    """Generation or prefill was given input it cannot process."""


class Completion(BaseModel):
    """One generated completion with what its proofs and checks need."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    token_ids: list[int]
    logprobs: list[float]
    """log softmax(logits / T) of each sampled token (T = 1 for greedy), full vocabulary."""
    hidden: torch.Tensor
    """bf16 [n_tokens, d]: the final hidden state of each generated token (see module doc)."""
    finish_reason: Literal["eos", "length"]
    seed: int

    @field_validator("hidden")
    @classmethod
    def _bf16_matrix(cls, hidden: torch.Tensor) -> torch.Tensor:
        if hidden.dim() != 2 or hidden.dtype != torch.bfloat16:
            raise ValueError("hidden must be a bf16 [n_tokens, d] tensor")
        return hidden

    @model_validator(mode="after")
    def _lengths_agree(self) -> Completion:
        if not len(self.token_ids) == len(self.logprobs) == self.hidden.shape[0]:
            raise ValueError("token_ids, logprobs and hidden must have one entry per token")
        return self


class Prefill(BaseModel):
    """The validator's recomputation for one completion's positions."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    hidden: torch.Tensor
    """bf16 [n_tokens, d] on the CPU, same convention as Completion.hidden."""
    logits: torch.Tensor
    """float32 [n_tokens, vocab]: the logits each completion token was sampled from, on the backend's device
    (the checks run where they are: only per-position verdict values cross to the host)."""


class StopTokens:
    """`eos_token_id` / `eos_token_ids` for a backend whose constructor sets `_eos_ids` (never empty)."""

    _eos_ids: tuple[int, ...]

    @property
    def eos_token_id(self) -> int:
        """The first stop token (see `eos_token_ids` for all of them)."""
        return self._eos_ids[0]

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Every token that ends a completion."""
        return self._eos_ids


@runtime_checkable
class InferenceBackend(Protocol):
    """What the worker and validator need from an inference engine."""

    @property
    def eos_token_id(self) -> int: ...

    @property
    def eos_token_ids(self) -> tuple[int, ...]: ...

    @property
    def vocab_size(self) -> int: ...

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingSpec, seeds: Sequence[int]
    ) -> list[Completion]:
        """One completion per prompt; sequence j samples with seed seeds[j] under sampling rule v2 (proofs.sampling)."""
        ...

    def prefill(self, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> Prefill:
        """Hidden states and logits of the completion positions, recomputed in one pass."""
        ...

    def prefill_batch(
        self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[Prefill]:
        """`prefill` for many (prompt, completion) pairs at once."""
        ...
