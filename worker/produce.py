"""One rollout file for (policy, run spec, submission binding): the honest worker's product."""

from __future__ import annotations

import torch

from inference.policy import stop_token_ids
from inference.torch_backend import TorchBackend
from proofs.assignment import assign_prompts
from protocol.digest import Digest
from protocol.rollouts import RolloutBatch, encode_rollouts
from protocol.runspec import RunSpec
from protocol.submission import SubmissionBinding
from tasks.base import assignment_space
from tasks.registry import build_task
from worker.policy import Policy
from worker.rollouts import make_rollouts


def make_batch(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
               compute_dtype: torch.dtype = torch.float32) -> RolloutBatch:
    """Generate the assigned prompts' completions with proofs (adversaries start from this too), computing in
    `compute_dtype` (the policy's model is converted to it in place, as the torch backend does)."""
    task = build_task(spec.task)
    indices = assign_prompts(spec.pool_seed_bytes, binding.worker, binding.nonce, assignment_space(task),
                             spec.prompts_per_submission)
    backend = TorchBackend(policy.model, compute_dtype=compute_dtype,
                           eos_token_id=stop_token_ids(policy.model, policy.tokenizer),
                           pad_token_id=policy.tokenizer.pad_token_id)
    return make_rollouts(backend, policy.tokenizer, task, spec.task, indices, spec.sampling, binding,
                         Digest(policy.manifest_digest), pool_seed=spec.pool_seed_bytes)


def produce_rollout_file(policy: Policy, spec: RunSpec, binding: SubmissionBinding,
                         compute_dtype: torch.dtype = torch.float32) -> tuple[bytes, int]:
    """Rollout file bytes and sample count for one submission."""
    batch = make_batch(policy, spec, binding, compute_dtype)
    return encode_rollouts(batch), len(batch.samples)
