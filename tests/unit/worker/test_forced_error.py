"""A planted forced error (decision 0009 §2, docs/protocol.md R9.26) against the validator's own checks, with a real
tiny torch policy: an honest file passes them; the same file with a forced error fails the reward check (exact: no
tolerance), and, its reward restored, the sampling replay at a logit tolerance a thousand times the shipped one."""

from __future__ import annotations

import pytest

from inference.tiny import build_char_tokenizer, build_tiny_llama, char_vocab
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.spotcheck import MAX_BPS
from protocol.submission import SubmissionBinding
from protocol.verdicts import Reason
from tasks.registry import build_task
from validator.checks import check_completions, check_contents, reference_backend, verify_config_of
from validator.outcome import Submission
from worker.forced import flipped, plant_forced_error
from worker.policy import Policy
from worker.produce import make_batch, torch_backend_of

SPEC = RunSpec(task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}},
               sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=8), prompts_per_submission=2,
               pool_seed="0x" + "6c" * 32,
               verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                             toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True))
BINDING = SubmissionBinding(chain_id=1, pool_contract="0x" + "00" * 20, pool_id=1, worker="0x" + "ab" * 20, step=0,
                            nonce=3)


@pytest.fixture(scope="module")
def files():
    policy = Policy(0, b"\x11" * 32, build_tiny_llama(len(char_vocab()), seed=3, hidden=32, layers=1, heads=2),
                    build_char_tokenizer())
    honest = make_batch(policy, SPEC, BINDING)
    planted = plant_forced_error(honest, SPEC, torch_backend_of(policy), policy.tokenizer)
    validator = reference_backend(SPEC, policy.model, policy.tokenizer)
    sub = Submission(BINDING.work_id, 1, BINDING.worker, 0, len(honest.samples), BINDING.nonce, b"\x00" * 32)
    return policy, honest, planted, validator, sub


def test_the_planted_error_is_the_lowest_probability_first_token_and_a_flipped_reward(files):
    policy, honest, planted, _, _ = files
    first, was = planted.samples[0], honest.samples[0]
    logits = torch_backend_of(policy).prefill(was.prompt_ids, was.completion_ids).logits[0]
    assert first.completion_ids[0] == int(logits.argmin()) != was.completion_ids[0]
    assert first.completion_ids[1:] == was.completion_ids[1:] and planted.samples[1:] == honest.samples[1:]
    task = build_task(SPEC.task)
    text = policy.tokenizer.decode(first.completion_ids, skip_special_tokens=True)
    assert not task.reward_matches(task.problem(first.prompt_index), text, len(first.completion_ids), first.reward)


def test_the_validators_checks_pass_the_honest_file_and_flag_the_forced_error(files):
    policy, honest, planted, validator, sub = files
    task = build_task(SPEC.task)
    config = verify_config_of(SPEC)
    assert check_contents(SPEC, task, config, MAX_BPS, sub, honest, validator, policy.tokenizer).ok
    caught = check_contents(SPEC, task, config, MAX_BPS, sub, planted, validator, policy.tokenizer)
    assert not caught.ok and caught.reason == Reason.REWARD and caught.failing_samples == [0]
    # the reward put right, the replay still flags the first token, at a thousand times the shipped tolerance
    first = planted.samples[0]
    text = policy.tokenizer.decode(first.completion_ids, skip_special_tokens=True)
    true = task.reward(task.problem(first.prompt_index), text, len(first.completion_ids))
    rewarded = planted.model_copy(update={"samples": [first.model_copy(update={"reward": true}),
                                                      *planted.samples[1:]]})
    loose = config.model_copy(update={"logit_tolerance": 1000 * config.logit_tolerance})
    replayed = check_completions(SPEC, loose, MAX_BPS, sub, rewarded, validator)
    assert not replayed.ok and 0 in replayed.failing_samples


def test_a_flipped_reward_never_matches():
    task = build_task(SPEC.task)
    problem = task.problem(0)
    for text in ("", "123", problem.prompt[-3:]):
        assert not task.reward_matches(problem, text, len(text), flipped(task, problem, text, len(text)))
