"""One rollout file for (policy, run spec, submission binding): the honest worker's product."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from inference.backend import InferenceBackend, InferenceError
from inference.device import Compute
from inference.exact import quantise_policy
from inference.exact_backend import ExactBackend
from inference.policy import stop_token_ids
from inference.torch_backend import TorchBackend
from proofs.assignment import assign_prompts
from protocol.digest import Digest
from protocol.errors import InvalidInput
from protocol.phases import phase
from protocol.rollouts import RolloutBatch, encode_rollouts
from protocol.runspec import RunSpec, UnrunnablePolicy
from protocol.submission import SubmissionBinding
from tasks.base import assignment_space
from tasks.registry import build_task
from worker.policy import Policy
from worker.rollouts import make_rollouts


def torch_backend_of(policy: Policy, compute_dtype: torch.dtype = torch.float32,
                     device: str | torch.device = "cpu") -> TorchBackend:
    """The torch backend generating with `policy` in `compute_dtype` on `device` (the policy's model is converted
    and moved there in place)."""
    return TorchBackend(policy.model, compute_dtype=compute_dtype, device=device,
                        eos_token_id=stop_token_ids(policy.model, policy.tokenizer),
                        pad_token_id=policy.tokenizer.pad_token_id)


def exact_backend_of(policy: Policy, device: str | torch.device = "cpu") -> ExactBackend:
    """The exact-mode backend of `policy`: its checkpoint's integer form (inference.exact.quantise_policy), on
    `device`."""
    return exact_backend(policy.model, policy.tokenizer, device)


def exact_backend(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                  device: str | torch.device = "cpu") -> ExactBackend:
    """The integer form of `model` (quantised as every party does) behind the backend interface, on `device`."""
    return ExactBackend(quantise_policy(model).to(device), stop_token_ids(model, tokenizer), tokenizer.pad_token_id)


def engine_problem(spec: RunSpec, compute: Compute) -> str | None:
    """Why the engine `compute` chooses cannot generate the pool of `spec`'s completions (None: it can)."""
    if spec.inference == "exact" and compute.backend == "vllm":
        return ("the pool's run spec says inference = \"exact\": completions come from the integer policy "
                "(inference.exact), which --backend vllm cannot compute; use --backend torch")
    return None


def backend_of(policy: Policy, compute: Compute, spec: RunSpec | None = None) -> InferenceBackend:
    """The engine `compute` chooses for `policy`: in an exact pool (`spec.inference`) the integer policy on
    compute's device; else the torch backend on its device and dtype, or a vLLM engine on the policy's Hugging
    Face folder (vLLM is imported here, only when chosen)."""
    if spec is not None:
        problem = engine_problem(spec, compute)
        if problem:
            raise InvalidInput(problem)
        if spec.inference == "exact":
            return exact_backend_of(policy, compute.device)
    if compute.backend == "vllm":
        if policy.folder is None:
            raise InvalidInput("--backend vllm loads the policy from its Hugging Face folder, and this policy was "
                             "loaded without one")
        from inference.vllm_backend import VllmBackend

        return VllmBackend(str(policy.folder), dtype=compute.dtype)
    return torch_backend_of(policy, compute.torch_dtype, compute.device)


def make_batch(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
               compute_dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
               backend: InferenceBackend | None = None) -> RolloutBatch:
    """Generate the assigned prompts' completions with proofs (adversaries start from this too) with `backend`,
    by default the torch backend computing in `compute_dtype` on `device` (the policy's model is converted to them
    in place, as the torch backend does). An exact pool's default backend is the integer policy
    (`exact_backend_of`), its files carry no TOPLOC proofs; UnrunnablePolicy when exact mode cannot run the policy
    (`refused_in_exact_mode`)."""
    task = build_task(spec.task)
    indices = assign_prompts(spec.pool_seed_bytes, binding.worker, binding.nonce, assignment_space(task),
                             spec.prompts_per_submission)
    exact = spec.inference == "exact"
    with refused_in_exact_mode(policy, spec):
        if backend is None:
            backend = exact_backend_of(policy, device) if exact else torch_backend_of(policy, compute_dtype, device)
        return make_rollouts(backend, policy.tokenizer, task, spec.task, indices, spec.sampling, binding,
                             Digest(policy.manifest_digest), pool_seed=spec.pool_seed_bytes, prove=not exact)


@contextmanager
def refused_in_exact_mode(policy: Policy, spec: RunSpec) -> Iterator[None]:
    """In an exact pool, an InferenceError inside becomes UnrunnablePolicy: exact mode cannot quantise the policy, or its
    integers break a bound while generating the binding's completions (deterministic: another try fails alike)."""
    try:
        yield
    except InferenceError as exc:
        if spec.inference != "exact":
            raise
        raise UnrunnablePolicy(f"the policy of step {policy.step} cannot run in exact mode: {exc}") from None


def produce_rollout_file(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
                         compute_dtype: torch.dtype = torch.float32,
                         device: str | torch.device = "cpu") -> tuple[bytes, int]:
    """Rollout file bytes and sample count for one submission."""
    batch = make_batch(policy, spec, binding, compute_dtype, device)
    return encode_rollouts(batch), len(batch.samples)


class Producer:
    """The worker's RolloutProducer on the engine `compute` chooses (`worker start --backend --device --dtype`).

    It builds one backend per policy and keeps it for that policy's submissions: a vLLM engine loads the
    checkpoint once and holds most of its GPU, so the previous policy's engine is dropped before the next is
    built."""

    def __init__(self, compute: Compute | None = None) -> None:
        self.compute = compute or Compute()
        self._built: tuple[Policy, InferenceBackend] | None = None

    def backend_for(self, policy: Policy, spec: RunSpec | None = None) -> InferenceBackend:
        """The backend of `policy` in the pool of `spec` (the daemon makes a new Policy for each checkpoint it
        loads; a pool's spec never changes)."""
        if self._built is None or self._built[0] is not policy:
            if self._built is not None and self.compute.device != "cpu":  # free the GPU before loading again
                self._built = None
                gc.collect()
                torch.cuda.empty_cache()
            self._built = (policy, backend_of(policy, self.compute, spec))
        return self._built[1]

    def __call__(self, policy: Policy, spec: RunSpec, binding: SubmissionBinding) -> tuple[bytes, int]:
        """The file of `binding`; UnrunnablePolicy when exact mode cannot run the policy (`refused_in_exact_mode`)."""
        with refused_in_exact_mode(policy, spec):
            backend = self.backend_for(policy, spec)
        batch = make_batch(policy, spec, binding, backend=backend)
        with phase("encode"):
            return encode_rollouts(batch), len(batch.samples)
