"""A rollout file's rewards scored again: what the validator's reward check and the trainer's intake both ask.

A file's samples claim a reward each; the task's verifier is deterministic and its rewards exact (tasks.rewards), so any
party can score the completions again and compare bit for bit. The validator challenges a file with a sample that
differs (Reason.REWARD); the trainer, which learns only from accepted files, scores them again anyway and never trains
on one that differs — an accepted forced error (its reward is flipped by design, docs/protocol.md R9.26) or a reward a
lazy or allied judge let through.
"""

from __future__ import annotations

from protocol.rollouts import RolloutBatch
from tasks.base import Task
from tasks.sandbox import scoring_session


def misscored_samples(task: Task, tokenizer, batch: RolloutBatch) -> list[int]:
    """Indices of `batch`'s samples whose claimed reward is not the task verifier's, each scored as the text the
    tokenizer decodes (special tokens skipped), in one fresh scorer session for the file (tasks.sandbox)."""
    problems = {}
    bad = []
    with scoring_session():  # nothing one file's completions do to the scorer reaches the next file
        for i, s in enumerate(batch.samples):
            if s.prompt_index not in problems:
                problems[s.prompt_index] = task.problem(s.prompt_index)
            text = tokenizer.decode(s.completion_ids, skip_special_tokens=True)
            if not task.reward_matches(problems[s.prompt_index], text, len(s.completion_ids), s.reward):
                bad.append(i)
    return bad
