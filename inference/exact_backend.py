"""The inference backend of exact pools: `inference.exact`'s integer policy behind the `InferenceBackend` interface,
so that the worker's rollout code and the validator's structural checks run on it unchanged.

Completions carry what the file format asks for: the tokens, their log-probabilities under the integer policy
(log softmax of the Q16 logits / 2^16 / T, the behaviour policy the trainer must use) and the final hidden states
(Q16 / 2^16 in bf16; exact pools write no TOPLOC proofs, docs/protocol.md R5.8).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inference import exact
from inference.backend import Completion, InferenceError, Prefill, StopTokens
from protocol.runspec import SamplingSpec

Q16 = float(1 << exact.FRAC)


class ExactBackend(StopTokens):
    """InferenceBackend over an `ExactPolicy` (quantised from the pool's float checkpoint by everyone alike)."""

    def __init__(self, policy: exact.ExactPolicy, eos_token_ids: Sequence[int], pad_token_id: int | None = None):
        if not eos_token_ids:
            raise InferenceError("exact mode needs at least one EOS token id")
        self.policy = policy
        self._eos_ids = tuple(int(e) for e in eos_token_ids)
        self.pad_token_id = self._eos_ids[0] if pad_token_id is None else int(pad_token_id)

    @property
    def vocab_size(self) -> int:
        return self.policy.vocab_size

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingSpec, seeds: Sequence[int]) -> list[Completion]:
        """One completion per prompt with exact mode's sampling rule (R5.7); top-p < 1 is not defined there."""
        if params.top_p < 1:
            raise InferenceError("exact mode samples with top_p = 1 only")
        made = exact.generate(self.policy, prompts, seeds, params.temperature, params.max_tokens, self._eos_ids,
                              pad_id=self.pad_token_id)
        completions = []
        for completion, seed in zip(made, seeds, strict=True):
            ids = completion.token_ids
            logprobs = torch.log_softmax(completion.logits.double() / Q16 / params.temperature, dim=-1)
            completions.append(Completion(
                token_ids=ids, logprobs=logprobs[torch.arange(len(ids)), torch.tensor(ids)].tolist(),
                hidden=(completion.hidden.double() / Q16).to(torch.bfloat16),
                finish_reason="eos" if ids[-1] in self._eos_ids else "length", seed=int(seed)))
        return completions

    def prefill(self, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> Prefill:
        """The integer logits of the completion's positions as float (Q16 / 2^16); no hidden states are
        recomputed (exact pools carry no proofs): an empty [n, 0] tensor stands for them."""
        logits = exact.prefill_logits(self.policy, prompt_ids, completion_ids)
        return Prefill(hidden=torch.zeros((len(completion_ids), 0), dtype=torch.bfloat16),
                       logits=logits.double().div(Q16).float())

    def prefill_batch(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[Prefill]:
        return [self.prefill(prompt, completion) for prompt, completion in pairs]
