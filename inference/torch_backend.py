"""Torch backend for Hugging Face causal LMs: batched generation with a KV cache, seeded
Gumbel-max sampling, per-token logprobs and capture of the final hidden states from the same
forward pass that produces the logits; prefill for the validator.

The model is split into its decoder (`get_decoder()`, whose `last_hidden_state` is the output
of the final norm) and its LM head (`get_output_embeddings()`); logits are computed as
lm_head(last_hidden_state), so the captured hidden state is by construction exactly what the
LM head consumed. Models whose logits are not a plain function of that (logit soft-capping,
scaling) are refused.

Precision: the policy is a bf16 checkpoint. By default the backend computes in float32 (bf16
weights upcast exactly) and casts hidden states to bf16 for proofs: float32 is fast on CPUs and
makes honest runs agree to far below one bf16 unit, which is what lets the checks tell a model
run in lower precision from the real one. `compute_dtype=torch.bfloat16` runs in bf16, as a
GPU worker would; the pool's thresholds must then allow bf16 noise.

Device: `device="cuda"` runs everything on the GPU: the forward passes, the sampling rule's counter-based
noise (proofs.sampling, a fused Triton kernel), temperature, top-p, the chosen token, its logprob and the
hidden-state capture. Per decode step only the chosen token ids reach the host (to stop when every row
has ended); logprobs and hidden states come back once, at the end, as CPU tensors. Prefill's hidden states
come back to the CPU (TOPLOC's check runs there: d values a token); its float32 [n, V] logits stay on the
device, where the validator's replay, logprob and termination checks read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from transformers import DynamicCache, PreTrainedModel

from inference.backend import Completion, InferenceError, Prefill, StopTokens
from inference.logprobs import token_logprobs
from proofs.sampling import sample_tokens
from protocol.runspec import SamplingSpec

NO_EOS = -1
"""eos_token_id that disables stopping: every completion runs to max_tokens (benchmarks)."""


class TorchBackend(StopTokens):
    """InferenceBackend over an in-memory Hugging Face causal LM."""

    def __init__(
        self,
        model: PreTrainedModel,
        compute_dtype: torch.dtype = torch.float32,
        pad_token_id: int | None = None,
        eos_token_id: int | Sequence[int] | None = None,
        prefill_padding_side: Literal["left", "right"] = "right",
        prefill_chunk_size: int | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        """Converts `model` in place to `compute_dtype`, `device` and eval mode. The prefill options
        are the defaults of `prefill_batch` (how the validator batches its recomputation)."""
        config = model.config
        for attribute in ("final_logit_softcapping", "logit_scale"):
            if getattr(config, attribute, None):
                raise InferenceError(f"models with {attribute} are not supported")
        self.device = torch.device(device)
        self.model = model.to(device=self.device, dtype=compute_dtype).eval()
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        eos = eos_token_id if eos_token_id is not None else config.eos_token_id
        if eos is None:
            raise InferenceError("model config has no eos_token_id; pass eos_token_id")
        self._eos_ids = tuple(int(e) for e in eos) if isinstance(eos, (list, tuple)) else (int(eos),)
        if not self._eos_ids:
            raise InferenceError("eos_token_id is an empty list")
        self._eos_set = frozenset(self._eos_ids)
        pad = pad_token_id if pad_token_id is not None else config.pad_token_id
        self.pad_token_id = int(pad) if pad is not None else self._eos_ids[0]
        self.vocab_size = int(self.lm_head.weight.shape[0])
        self.prefill_padding_side = prefill_padding_side
        self.prefill_chunk_size = prefill_chunk_size

    def _check_ids(self, ids: Sequence[int], what: str) -> None:
        if any(not 0 <= t < self.vocab_size for t in ids):
            raise InferenceError(
                f"{what} has token ids outside the vocabulary [0, {self.vocab_size})"
            )

    # ---- generation ---------------------------------------------------------------------

    @torch.inference_mode()
    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingSpec, seeds: Sequence[int]
    ) -> list[Completion]:
        """Generate one completion per prompt in a single left-padded batch."""
        if len(prompts) != len(seeds):
            raise InferenceError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        if not prompts:
            return []
        for prompt in prompts:
            if not prompt:
                raise InferenceError("empty prompt")
            self._check_ids(prompt, "prompt")
        batch = len(prompts)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt))
            mask[row, width - len(prompt) :] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        cache = DynamicCache(config=self.model.config)
        out = self.decoder(
            input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache,
            use_cache=True,
        )
        hidden = out.last_hidden_state[:, -1]
        next_position = positions[:, -1:] + 1

        scale = params.temperature if params.temperature > 0 else 1.0
        steps = params.max_tokens
        seed_tensor = torch.tensor([int(s) for s in seeds], dtype=torch.int64, device=self.device)
        eos_ids = torch.tensor(self._eos_ids, dtype=torch.long, device=self.device)
        token_buffer = torch.full((batch, steps), self.pad_token_id, dtype=torch.long, device=self.device)
        logprob_buffer = torch.zeros((batch, steps), dtype=torch.float32, device=self.device)
        hidden_buffer = torch.empty((batch, steps, hidden.shape[-1]), dtype=torch.bfloat16, device=self.device)
        ended = torch.zeros(batch, dtype=torch.bool, device=self.device)
        produced = 0
        for step in range(steps):
            logits = self.lm_head(hidden).float()
            next_ids = sample_tokens(logits, seed_tensor, step, params.temperature, params.top_p)
            logprob_buffer[:, step] = token_logprobs(logits, next_ids, scale)  # the validator's own function
            hidden_buffer[:, step] = hidden.to(torch.bfloat16)
            next_ids = next_ids.masked_fill(ended, self.pad_token_id)
            token_buffer[:, step] = next_ids
            ended |= torch.isin(next_ids, eos_ids)
            produced = step + 1
            if produced == steps or bool(ended.all()):  # the step's one sync with the host
                break
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.long, device=self.device)], dim=1)
            out = self.decoder(
                input_ids=next_ids[:, None], attention_mask=mask, position_ids=next_position,
                cache=out.cache, use_cache=True,
            )
            hidden = out.last_hidden_state[:, -1]
            next_position = next_position + 1

        token_rows = token_buffer[:, :produced].cpu().tolist()
        logprob_rows = logprob_buffer[:, :produced].cpu()
        hidden_rows = hidden_buffer[:, :produced].cpu()
        completions = []
        for row in range(batch):
            ids = token_rows[row]
            length = next((k + 1 for k, t in enumerate(ids) if t in self._eos_set), produced)
            completions.append(Completion(
                token_ids=ids[:length],
                logprobs=logprob_rows[row, :length].tolist(),
                hidden=hidden_rows[row, :length].clone(),
                finish_reason="eos" if ids[length - 1] in self._eos_set else "length",
                seed=int(seeds[row]),
            ))
        return completions

    # ---- prefill (validator side) ---------------------------------------------------------

    def prefill(self, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> Prefill:
        """Hidden states and logits of the completion positions, in one forward pass."""
        return self.prefill_batch([(prompt_ids, completion_ids)])[0]

    @torch.inference_mode()
    def prefill_batch(
        self,
        pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
        padding_side: Literal["left", "right"] | None = None,
        chunk_size: int | None = None,
    ) -> list[Prefill]:
        """Prefill many (prompt, completion) pairs in one padded batch.

        `chunk_size` feeds the sequences through the KV cache `chunk_size` positions at a time
        (chunked prefill) instead of in one pass; the results agree up to float noise.
        """
        if not pairs:
            return []
        padding_side = padding_side or self.prefill_padding_side
        chunk_size = chunk_size or self.prefill_chunk_size
        if chunk_size is not None and chunk_size < 1:
            raise InferenceError("chunk_size must be positive")
        sequences: list[list[int]] = []
        for prompt, completion in pairs:
            if not prompt:
                raise InferenceError("empty prompt")
            self._check_ids(prompt, "prompt")
            self._check_ids(completion, "completion")
            sequences.append(list(prompt) + list(completion)[:-1])
        batch = len(sequences)
        width = max(len(s) for s in sequences)
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.long)
        offsets = []
        for row, seq in enumerate(sequences):
            start = width - len(seq) if padding_side == "left" else 0
            input_ids[row, start : start + len(seq)] = torch.tensor(seq)
            mask[row, start : start + len(seq)] = 1
            offsets.append(start)
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp_min(0)

        step = chunk_size or width
        cache = DynamicCache(config=self.model.config)
        parts = []
        for begin in range(0, width, step):
            end = min(begin + step, width)
            out = self.decoder(
                input_ids=input_ids[:, begin:end], attention_mask=mask[:, :end],
                position_ids=positions[:, begin:end], cache=cache, use_cache=True,
            )
            cache = out.cache
            parts.append(out.last_hidden_state)
        hidden_all = torch.cat(parts, dim=1)

        results = []
        for row, (prompt, completion) in enumerate(pairs):
            first = offsets[row] + len(prompt) - 1
            hidden = hidden_all[row, first : first + len(completion)]
            results.append(
                Prefill(hidden=hidden.to(torch.bfloat16).cpu(), logits=self.lm_head(hidden).float())
            )
        return results
