"""Rollout generation on a real tiny policy: assignment, seeds, rewards and TOPLOC proofs
that a validator's prefill accepts, through the rollout file."""

import torch

from inference import exact
from inference.local_store import LocalPolicyStore, TrainerProgress, load_local_policy, write_progress
from inference.policy import stop_token_ids
from inference.tiny import build_char_tokenizer, build_tiny_llama
from inference.torch_backend import TorchBackend
from proofs.assignment import assign_prompts, check_assignment
from proofs.sampling import derive_seed, sample_index
from proofs.toploc import accept, verify_proofs
from protocol.digest import Digest
from protocol.rollouts import decode_rollouts, encode_rollouts, read_rollout_file
from protocol.runspec import SamplingSpec
from protocol.submission import SubmissionBinding, work_id_of
from tasks import TaskSpec, build_task
from trainer.evaluate import greedy_accuracy
from trainer.exact_behaviour import rule_logprobs
from worker.local_cli import LocalWorkerConfig, may_generate, run_worker
from worker.rollouts import make_rollouts

WORKER = "0x" + "ab" * 20
SPEC = TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 4})


def test_rollouts_carry_assigned_prompts_seeds_rewards_and_valid_proofs():
    torch.manual_seed(0)
    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(len(tokenizer), seed=3, hidden=32, layers=1, heads=2)
    task = build_task(SPEC)
    pool_seed = bytes(range(32))
    indices = assign_prompts(pool_seed, WORKER, 2, 10_000, 3)
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=40)
    backend = TorchBackend(model)
    binding = SubmissionBinding(chain_id=31337, pool_contract="0x" + "cc" * 20, pool_id=7, worker=WORKER, step=5, nonce=2,
                                seed_block_hash=Digest(b"\x5e" * 32))
    batch = make_rollouts(backend, tokenizer, task, SPEC, indices, sampling, binding, Digest(b"\xcd" * 32), pool_seed)

    batch = decode_rollouts(encode_rollouts(batch))
    assert batch.header.binding == binding and batch.header.proof_chunk == 32
    assert batch.header.binding.work_id == work_id_of(31337, "0x" + "cc" * 20, 7, WORKER, 2)
    assert check_assignment([batch.samples[g * 4].prompt_index for g in range(3)], pool_seed, WORKER, 2, 10_000)
    for row, sample in enumerate(batch.samples):
        assert sample.seed == derive_seed(pool_seed, WORKER, b"\x5e" * 32, sample_index(2, row, 12))
        problem = task.problem(sample.prompt_index)
        text = tokenizer.decode(sample.completion_ids, skip_special_tokens=True)
        assert sample.reward == task.reward(problem, text, len(sample.completion_ids))
        prefill = backend.prefill(sample.prompt_ids, sample.completion_ids)
        assert accept(verify_proofs(prefill.hidden, sample.proofs))
    assert len({s.seed for s in batch.samples}) == 12


def test_greedy_accuracy_counts_exact_answers():
    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(len(tokenizer), seed=3, hidden=32, layers=1, heads=2)
    assert greedy_accuracy(model, tokenizer, build_task(SPEC), 10, 6) == 0.0  # an untrained policy


def test_worker_pacing_keeps_within_the_async_level():
    sync = LocalWorkerConfig(async_level=0, batch_samples=128, prompts_per_file=8, sampling=SamplingSpec(group_size=16))
    assert sync.files_per_step == 1
    assert may_generate(sync, unconsumed=0, trainer_step=3, waiting=True, policy_step=3)
    assert not may_generate(sync, unconsumed=0, trainer_step=3, waiting=False, policy_step=3)
    assert not may_generate(sync, unconsumed=0, trainer_step=4, waiting=True, policy_step=3)
    assert not may_generate(sync, unconsumed=1, trainer_step=3, waiting=True, policy_step=3)
    two = LocalWorkerConfig(async_level=2, batch_samples=256, prompts_per_file=8, sampling=SamplingSpec(group_size=16))
    assert two.files_per_step == 2
    assert may_generate(two, unconsumed=3, trainer_step=0, waiting=False, policy_step=0)
    assert not may_generate(two, unconsumed=4, trainer_step=0, waiting=False, policy_step=0)
    # the trainer has needed 5 files a step (most groups carried no signal): pace on that
    assert may_generate(two, unconsumed=9, trainer_step=4, waiting=False, policy_step=4, observed_files_per_step=5.0)
    assert not may_generate(two, unconsumed=10, trainer_step=4, waiting=False, policy_step=4, observed_files_per_step=5.0)


def test_an_exact_local_worker_samples_from_the_published_policys_integer_form(tmp_path):
    tokenizer = build_char_tokenizer()
    model = build_tiny_llama(len(tokenizer), seed=3, hidden=32, layers=1, heads=2)
    LocalPolicyStore(tmp_path / "policy", model.config, tokenizer).publish(0, model.state_dict())
    (tmp_path / "rollouts").mkdir()
    write_progress(tmp_path / "rollouts", TrainerProgress(step=0, consumed=0, waiting=True))
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=6)
    config = LocalWorkerConfig(run_dir=tmp_path, task=SPEC, sampling=sampling, prompts_per_file=2, batch_samples=8,
                               address=WORKER, inference="exact", max_files=1)
    assert run_worker(config) == 1

    [path] = (tmp_path / "rollouts").glob("*.parquet")
    batch = read_rollout_file(path)
    assert batch.header.proof_chunk == 0 and all(s.proofs == [] for s in batch.samples)  # exact files carry no TOPLOC
    # anyone holding the published checkpoint recomputes the integer policy, its tokens and their log-probabilities
    float_policy = load_local_policy(tmp_path / "policy", 0)
    policy = exact.quantise_policy(float_policy)
    made = exact.generate(policy, [s.prompt_ids for s in batch.samples], [s.seed for s in batch.samples], 1.0, 6,
                          stop_token_ids(float_policy, tokenizer))
    assert [s.completion_ids for s in batch.samples] == [m.token_ids for m in made]
    for sample in batch.samples:
        logits = exact.prefill_logits(policy, sample.prompt_ids, sample.completion_ids)
        expected = rule_logprobs(logits, torch.tensor(sample.completion_ids), 1.0)
        assert torch.allclose(torch.tensor(sample.logprobs), expected, atol=1e-6)
