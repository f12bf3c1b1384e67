"""Rollout generation: the worker's inner loop as a library.

For the assigned prompts: G samples per prompt with seeded Gumbel sampling, rewards from
the task verifier, TOPLOC proofs of the final hidden states, all written into one rollout
file (ledger_client.rollouts) stamped with the policy's step and digest and the worker.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pydantic import BaseModel, Field
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ledger_client.rollouts import RolloutBatch, RolloutHeader, RolloutSample
from tasks.base import Task
from tasks.encoding import encode_prompt
from tasks.registry import TaskSpec
from worker.generation import generate

try:  # TOPLOC lands on the `toploc` branch; without it files declare proof_chunk = 0.
    from proofs.toploc import build_proofs
except ImportError:  # pragma: no cover - depends on the merge state of the proofs room
    build_proofs = None

PROOF_CHUNK = 32


class SamplingConfig(BaseModel):
    """How a worker samples; must match the pool's (and the trainer's) settings."""

    group_size: int = Field(16, ge=1)
    temperature: float = Field(1.0, gt=0)
    max_tokens: int = Field(8, ge=1)


def sampling_seed(pool_seed: int, worker: str, step: int, nonce: int, sample_index: int) -> int:
    """The Gumbel generator seed of one sequence: a hash of who sampled it, for which step
    and assignment nonce, and its index in the file; a validator recomputes it."""
    material = f"proofswarm/sampling/{pool_seed}/{worker.lower()}/{step}/{nonce}/{sample_index}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")


def make_rollouts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    task: Task,
    task_spec: TaskSpec,
    prompt_indices: Sequence[int],
    sampling: SamplingConfig,
    policy_step: int,
    manifest_digest: str,
    worker: str,
    pool_seed: int = 0,
    nonce: int = 0,
) -> RolloutBatch:
    """Generate, score and prove G completions for each assigned train prompt."""
    problems = [task.problem(i) for i in prompt_indices]
    prompt_ids = [encode_prompt(tokenizer, p.prompt) for p in problems]
    rows = [(g, s) for g in range(len(problems)) for s in range(sampling.group_size)]
    seeds = [sampling_seed(pool_seed, worker, policy_step, nonce, i) for i in range(len(rows))]
    generations = generate(
        model,
        [prompt_ids[g] for g, _ in rows],
        max_tokens=sampling.max_tokens,
        eos_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id,
        temperature=sampling.temperature,
        seeds=seeds,
    )
    samples = []
    for (g, s), seed, gen in zip(rows, seeds, generations, strict=True):
        text = tokenizer.decode(gen.completion_ids, skip_special_tokens=True)
        samples.append(
            RolloutSample(
                group=g,
                sample=s,
                prompt_index=problems[g].index,
                prompt_ids=prompt_ids[g],
                completion_ids=gen.completion_ids,
                logprobs=gen.logprobs,
                reward=task.reward(problems[g], text, len(gen.completion_ids)),
                finish_reason=gen.finish_reason,
                seed=seed,
                proofs=build_proofs(gen.hidden, chunk=PROOF_CHUNK) if build_proofs else [],
            )
        )
    header = RolloutHeader(
        policy_step=policy_step,
        manifest_digest=manifest_digest,
        worker=worker,
        task=task_spec.model_dump(),
        group_size=sampling.group_size,
        temperature=sampling.temperature,
        max_tokens=sampling.max_tokens,
        proof_chunk=PROOF_CHUNK if build_proofs else 0,
        nonce=nonce,
    )
    return RolloutBatch(header=header, samples=samples)


def greedy_accuracy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, task: Task, n_problems: int, max_tokens: int
) -> float:
    """Fraction of the first `n_problems` held-out (test split) problems solved greedily."""
    problems = [task.problem(i, "test") for i in range(n_problems)]
    generations = generate(
        model,
        [encode_prompt(tokenizer, p.prompt) for p in problems],
        max_tokens=max_tokens,
        eos_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id,
        temperature=0.0,
    )
    solved = sum(
        task.reward(p, tokenizer.decode(g.completion_ids, skip_special_tokens=True), len(g.completion_ids)) >= 1.0
        for p, g in zip(problems, generations, strict=True)
    )
    return solved / n_problems
