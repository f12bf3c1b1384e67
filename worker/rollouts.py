"""Rollout generation: the worker's inner loop as a library.

For the assigned prompts (proofs.assignment): G samples per prompt with seeded Gumbel
sampling (seeds from proofs.sampling.derive_seed), rewards from the task verifier, TOPLOC
proofs of the final hidden states, all in one rollout file (protocol.rollouts) bound to its
submission (chain, pool, worker, step, nonce) and stamped with the policy's manifest digest.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

from inference.backend import InferenceBackend
from proofs.sampling import derive_seed, sample_index
from proofs.toploc import build_proofs_batch
from protocol.digest import Digest
from protocol.phases import phase
from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample
from protocol.runspec import SamplingSpec
from protocol.submission import SubmissionBinding
from tasks.base import Task
from tasks.encoding import encode_prompt
from tasks.registry import TaskSpec
from tasks.sandbox import scoring_session

PROOF_CHUNK = 32


def make_rollouts(
    backend: InferenceBackend,
    tokenizer: PreTrainedTokenizerBase,
    task: Task,
    task_spec: TaskSpec,
    prompt_indices: Sequence[int],
    sampling: SamplingSpec,
    binding: SubmissionBinding,
    manifest_digest: Digest,
    pool_seed: bytes = bytes(32),
    prove: bool = True,
) -> RolloutBatch:
    """Generate, score and prove G completions for each assigned train prompt (`prove=False`: no TOPLOC proofs
    and a proof chunk of 0, as exact pools' files are)."""
    problems = [task.problem(i) for i in prompt_indices]
    prompt_ids = [encode_prompt(tokenizer, p.prompt) for p in problems]
    rows = [(g, s) for g in range(len(problems)) for s in range(sampling.group_size)]
    seeds = [derive_seed(pool_seed, binding.worker, binding.seed_block_hash, sample_index(binding.nonce, r, len(rows)))
             for r in range(len(rows))]
    with phase("generate"):
        completions = backend.generate([prompt_ids[g] for g, _ in rows], sampling, seeds)
    chunk = PROOF_CHUNK if prove else 0
    with phase("prove"):
        proofs = build_proofs_batch([c.hidden for c in completions], chunk=chunk) if prove else [[] for _ in completions]
    samples = []
    with scoring_session():
        rewards = [task.reward(problems[g], tokenizer.decode(c.token_ids, skip_special_tokens=True), len(c.token_ids))
                   for (g, _), c in zip(rows, completions, strict=True)]
    for (g, s), completion, proof, reward in zip(rows, completions, proofs, rewards, strict=True):
        samples.append(
            RolloutSample(
                group=g,
                sample=s,
                prompt_index=problems[g].index,
                prompt_ids=prompt_ids[g],
                completion_ids=completion.token_ids,
                logprobs=completion.logprobs,
                reward=reward,
                finish_reason=completion.finish_reason,
                seed=completion.seed,
                proofs=proof,
            )
        )
    header = RolloutHeader.bound(binding, manifest_digest=manifest_digest, task=task_spec, sampling=sampling,
                                 proof_chunk=chunk)
    return RolloutBatch(header=header, samples=samples)
