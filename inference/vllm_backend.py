"""vLLM backend (optional extra `pip install .[vllm]`, pinned to vllm==0.32.0), behind the same interface as
the torch backend. Written against vLLM 0.32.0's legacy V1 model runner (VLLM_USE_V2_MODEL_RUNNER=0) and its
per-batch logits-processor interface (`vllm.v1.sample.logits_processor.LogitsProcessor`; the Model Runner V2
default since 0.25 has another one); never run on this project's CPU machines: tests/integration/test_inference_vllm.py runs
it when a GPU and vLLM are present.

How it maps the interface onto vLLM:
- the engine runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, V1 model runner), so a
  logits processor and a wrapper of the model's `compute_logits` can share state with us;
- `compute_logits(hidden_states)` is wrapped to remember its input: one row per request, the
  final hidden state the LM head consumes (our hidden capture, no second pass);
- the `GumbelReplaySampler` logits processor applies our sampling rule (proofs.sampling, rule v2) on the
  device: each row's noise is g(request seed, the row's decode position, v), drawn where the logits live;
  it picks the token, records hidden state and logprob (kept on the device until the request ends), and
  masks every other token so vLLM's own sampler can only emit ours (`sample_rows`, unit-tested on the CPU);
- prefill runs prompt + completion[:-1] with max_tokens=1 and captures the final norm's output
  for every position with a forward hook (prefix caching off, so nothing is skipped).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from inference.backend import Completion, InferenceError, Prefill, StopTokens
from inference.logprobs import token_logprobs
from inference.policy import collect_stop_ids
from proofs.sampling import sample_tokens
from protocol.runspec import SamplingSpec

_KEY = "proofswarm_key"


@dataclass
class _RequestState:
    key: str
    seed: int
    temperature: float
    top_p: float
    hidden: list[torch.Tensor] = field(default_factory=list)
    """Per token, the final hidden state (bf16 [H], on the engine's device until the request ends)."""
    logprobs: list[torch.Tensor] = field(default_factory=list)
    """Per token, its logprob (a 0-d float32 tensor on the engine's device)."""
    tokens: list[int] = field(default_factory=list)


class _Shared:
    """State shared between the backend, the logits processor and the compute_logits wrapper
    (all in one process)."""

    lock = threading.Lock()
    last_hidden: torch.Tensor | None = None
    pending: dict[str, _RequestState] = {}
    finished: dict[str, _RequestState] = {}


def _logits_processor_class() -> type:
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

    class GumbelReplaySampler(LogitsProcessor):  # type: ignore[misc]
        """Samples every proofswarm request with the seeded Gumbel-max rule."""

        def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
            self.rows: dict[int, _RequestState] = {}

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            extra = sampling_params.extra_args or {}
            if _KEY in extra and extra[_KEY] not in _Shared.pending:
                raise ValueError(f"unknown {_KEY} {extra[_KEY]!r}")

        def is_argmax_invariant(self) -> bool:
            return False

        def update_state(self, batch_update: BatchUpdate | None) -> None:
            if batch_update is None:
                return
            for index in batch_update.removed:
                self.rows.pop(index, None)
            for added in batch_update.added:
                index, params = added[0], added[1]
                key = (params.extra_args or {}).get(_KEY) if params is not None else None
                if key is not None:
                    self.rows[index] = _Shared.pending[key]
                else:
                    self.rows.pop(index, None)
            for source, target, direction in batch_update.moved:
                a, b = self.rows.pop(source, None), self.rows.pop(target, None)
                if a is not None:
                    self.rows[target] = a
                if b is not None and str(direction).endswith("SWAP"):
                    self.rows[source] = b

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            if not self.rows:
                return logits
            hidden = _Shared.last_hidden
            if hidden is None or hidden.shape[0] != logits.shape[0]:
                raise InferenceError("hidden-state capture is out of step with the logits")
            return sample_rows(logits, hidden, self.rows)

    return GumbelReplaySampler


def sample_rows(logits: torch.Tensor, hidden: torch.Tensor, rows: dict[int, _RequestState]) -> torch.Tensor:
    """Sample batch rows `rows` (batch index -> request) of `logits` [batch, V] with the protocol's rule, in
    place on the logits' device: each row's decode position is the number of tokens its request has; the
    chosen token, its logprob and the row's hidden state are appended to the request's state; every other
    logit of the row becomes -inf and the chosen one 0, so any sampler of vLLM's emits it. Only the chosen
    token ids cross to the host."""
    groups: dict[tuple[float, float], list[int]] = {}
    for index, state in rows.items():
        groups.setdefault((state.temperature, state.top_p), []).append(index)
    for (temperature, top_p), indices in sorted(groups.items()):
        states = [rows[i] for i in indices]
        index_tensor = torch.tensor(indices, dtype=torch.long, device=logits.device)
        row_logits = logits.index_select(0, index_tensor).float()
        seeds = torch.tensor([st.seed for st in states], dtype=torch.int64, device=logits.device)
        positions = torch.tensor([len(st.tokens) for st in states], dtype=torch.int64, device=logits.device)
        chosen = sample_tokens(row_logits, seeds, positions, temperature, top_p)
        scale = temperature if temperature > 0 else 1.0
        logprobs = token_logprobs(row_logits, chosen, scale)
        row_hidden = hidden.index_select(0, index_tensor).to(torch.bfloat16)
        logits[index_tensor] = -float("inf")
        logits[index_tensor, chosen] = 0.0
        for k, (state, token) in enumerate(zip(states, chosen.tolist())):
            state.tokens.append(token)
            state.logprobs.append(logprobs[k])
            state.hidden.append(row_hidden[k])
    return logits


class VllmBackend(StopTokens):
    """InferenceBackend on a vLLM engine (one GPU, eager mode, in-process)."""

    _ids = itertools.count()

    def __init__(self, model_path: str, dtype: str = "bfloat16", **engine_kwargs: Any) -> None:
        try:
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
            from vllm import LLM
        except ImportError as err:
            raise InferenceError("vLLM is not installed: pip install '.[vllm]'") from err
        # chunked prefill off: a partial prompt chunk yields logits vLLM discards, and the logits processor
        # must only advance a request's Gumbel stream for a token that is really sampled
        self._llm = LLM(
            model=model_path, dtype=dtype, enforce_eager=True, enable_prefix_caching=False,
            enable_chunked_prefill=False, logits_processors=[_logits_processor_class()], **engine_kwargs,
        )
        self._norm_outputs: list[torch.Tensor] | None = None
        self._llm.apply_model(self._instrument)
        self._eos_ids = _stop_ids(model_path)
        self._vocab_size = int(self._llm.llm_engine.model_config.get_vocab_size())

    def _instrument(self, model: Any) -> None:
        original = model.compute_logits

        def compute_logits(hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            _Shared.last_hidden = hidden_states
            return original(hidden_states, *args, **kwargs)

        model.compute_logits = compute_logits

        def keep_norm_output(module: Any, inputs: Any, output: Any) -> None:
            if self._norm_outputs is not None:
                out = output[0] if isinstance(output, tuple) else output
                self._norm_outputs.append(out.detach().to(torch.bfloat16).cpu())

        model.model.norm.register_forward_hook(keep_norm_output)
        self._compute_logits = original

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingSpec, seeds: Sequence[int]
    ) -> list[Completion]:
        from vllm import SamplingParams as VllmParams
        from vllm.inputs import TokensPrompt

        if len(prompts) != len(seeds):
            raise InferenceError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        keys = []
        with _Shared.lock:
            for seed in seeds:
                key = f"req-{next(self._ids)}"
                _Shared.pending[key] = _RequestState(
                    key=key,
                    seed=int(seed),
                    temperature=params.temperature,
                    top_p=params.top_p,
                )
                keys.append(key)
            requests = [
                VllmParams(
                    temperature=1.0, top_p=1.0, max_tokens=params.max_tokens,
                    # our stop set only (generation-config EOS handling off, so "length" means length)
                    ignore_eos=True, stop_token_ids=list(self._eos_ids), extra_args={_KEY: key},
                )
                for key in keys
            ]
            outputs = self._llm.generate(
                [TokensPrompt(prompt_token_ids=list(p)) for p in prompts], requests,
                use_tqdm=False,
            )
            states = [_Shared.pending.pop(key) for key in keys]
        completions = []
        for out, state, seed in zip(outputs, states, seeds):
            tokens = list(out.outputs[0].token_ids)
            if tokens != state.tokens[: len(tokens)]:
                raise InferenceError("vLLM emitted a token the Gumbel sampler did not choose")
            n = len(tokens)
            completions.append(Completion(
                token_ids=tokens, logprobs=torch.stack(state.logprobs[:n]).cpu().tolist() if n else [],
                hidden=torch.stack(state.hidden[:n]).cpu(),
                finish_reason="eos" if tokens and tokens[-1] in self._eos_ids else "length",
                seed=int(seed),
            ))
        return completions

    def prefill(self, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> Prefill:
        from vllm import SamplingParams as VllmParams
        from vllm.inputs import TokensPrompt

        sequence = list(prompt_ids) + list(completion_ids)[:-1]
        self._norm_outputs = []
        try:
            self._llm.generate(
                [TokensPrompt(prompt_token_ids=sequence)],
                VllmParams(temperature=0.0, max_tokens=1), use_tqdm=False,
            )
            captured = torch.cat(self._norm_outputs, dim=0)
        finally:
            self._norm_outputs = None
        first = len(prompt_ids) - 1
        hidden = captured[first : first + len(completion_ids)]
        logits = self._llm.apply_model(
            lambda model: self._compute_logits(hidden.to(next(model.parameters()).device)).float().cpu()
        )[0]
        return Prefill(hidden=hidden, logits=logits)

    def prefill_batch(
        self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[Prefill]:
        return [self.prefill(p, c) for p, c in pairs]


def _stop_ids(model_path: str) -> tuple[int, ...]:
    """The checkpoint's stop tokens (tokenizer, config and generation config, as inference.policy reads them)."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    try:
        generation = GenerationConfig.from_pretrained(model_path).eos_token_id
    except OSError:
        generation = None
    return collect_stop_ids(AutoTokenizer.from_pretrained(model_path).eos_token_id,
                            AutoConfig.from_pretrained(model_path).eos_token_id, generation)

