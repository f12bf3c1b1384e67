"""The trainer loop: config loading, staleness and zero-advantage filtering in the loop,
exactly-once consumption and exact resume across a restart."""

import json
import os
import random

import pytest
import torch

from cli.errors import UsageError
from cli.options import load_settings
from inference.tiny import build_tiny_llama
from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample, write_rollout_file
from protocol.runspec import SamplingSpec
from trainer.batching import completion_logprobs, pack
from trainer.config import TrainerConfig
from trainer.loop import Trainer, TrainerStarved
from trainer.work_source import InMemorySource, LocalDirectorySource

VOCAB = 16
G = 4
SAMPLING = SamplingSpec(group_size=G, temperature=1.0, max_tokens=5)


def _model():
    return build_tiny_llama(VOCAB, seed=1, hidden=16, layers=1, heads=2)


def _batch(seed: int, policy_step: int = 0, rewards=None, groups: int = 2) -> RolloutBatch:
    rng = random.Random(seed)
    header = RolloutHeader(
        chain_id=0, pool_contract="0x" + "00" * 20, pool_id=0, nonce=seed,
        policy_step=policy_step, manifest_digest="0x" + "00" * 32, worker="0x" + "ab" * 20, task={"name": "test"},
        sampling=SAMPLING, proof_chunk=0,
    )
    samples = []
    for g in range(groups):
        prompt = [1] + [rng.randrange(4, VOCAB) for _ in range(3)]
        for s in range(G):
            n = rng.randint(1, 5)
            reward = rewards[s] if rewards is not None else float(s % 2)
            samples.append(RolloutSample(
                group=g, sample=s, prompt_index=g, prompt_ids=prompt,
                completion_ids=[rng.randrange(4, VOCAB) for _ in range(n)], logprobs=[-1.0] * n, reward=reward,
                finish_reason="length" if n == 5 else "eos", seed=s, proofs=[],
            ))
    return RolloutBatch(header=header, samples=samples)


def _config(tmp_path, **overrides):
    base = dict(run_dir=tmp_path, sampling=SAMPLING, batch_samples=2 * G, async_level=10,
                max_steps=4, wait_timeout_s=0.5, poll_interval_s=0.01)
    return TrainerConfig(**{**base, **overrides})


class RecordingSource(LocalDirectorySource):
    def __init__(self, folder, log):
        super().__init__(folder)
        self.log = log

    def poll(self):
        items = super().poll()
        self.log.extend(i.id for i in items)
        return items


def _write_file(folder, i):
    folder.mkdir(parents=True, exist_ok=True)
    write_rollout_file(folder / f"{i:03d}.parquet", _batch(seed=i))
    os.utime(folder / f"{i:03d}.parquet", ns=(i * 10**9, i * 10**9))  # oldest-first = file order


def test_config_precedence_toml_then_environment_then_command_line(tmp_path, monkeypatch):
    toml = tmp_path / "run.toml"
    toml.write_text('batch_samples = 64\n[sampling]\ngroup_size = 8\n[loss]\nepsilon = 0.3\n[task]\nname = "sort"\n')
    monkeypatch.setenv("PROOFSWARM_TRAINER_ASYNC_LEVEL", "1")
    config = load_settings(TrainerConfig, toml, ["--loss.delta", "5", "--sampling.group_size", "16"])
    assert (config.sampling.group_size, config.batch_samples, config.async_level) == (16, 64, 1)
    assert (config.loss.epsilon, config.loss.delta, config.task.name) == (0.3, 5.0, "sort")
    assert config.token_budget == 64 * config.sampling.max_tokens
    with pytest.raises(ValueError, match="multiple of group_size"):
        TrainerConfig(sampling=SamplingSpec(group_size=16), batch_samples=40)
    with pytest.raises(UsageError, match="does not exist"):
        load_settings(TrainerConfig, tmp_path / "missing.toml", [])


def test_each_file_is_consumed_exactly_once_and_resume_is_exact(tmp_path):
    straight_log, restarted_log = [], []
    a, b = tmp_path / "a", tmp_path / "b"
    straight = Trainer(_config(a), _model(), RecordingSource(a / "rollouts", straight_log))
    straight.start()
    for i in range(4):
        _write_file(a / "rollouts", i)
        straight.train_step()

    # checkpoint every 2 steps; the process dies after step 3 (file 002 handed out, not committed)
    first = Trainer(_config(b, checkpoint_every=2), _model(), RecordingSource(b / "rollouts", restarted_log))
    first.start()
    for i in range(3):
        _write_file(b / "rollouts", i)
        first.train_step()
    del first
    second = Trainer(_config(b, checkpoint_every=2), _model(), RecordingSource(b / "rollouts", restarted_log))
    second.start()
    assert second.step == 2
    _write_file(b / "rollouts", 3)
    second.run()

    assert straight_log == ["000.parquet", "001.parquet", "002.parquet", "003.parquet"]
    # file 002 was handed out again after the restart because step 3 was never committed
    assert restarted_log == ["000.parquet", "001.parquet", "002.parquet", "002.parquet", "003.parquet"]
    assert second.step == straight.step == 4
    for (name, x), y in zip(straight.model.state_dict().items(), second.model.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
    steps = [json.loads(line)["step"] for line in (b / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


def test_stale_rollouts_are_dropped_and_counted(tmp_path):
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path, async_level=1, max_steps=10), _model(), source)
    trainer.start()
    source.put("fresh0", _batch(0, policy_step=0))
    trainer.train_step()
    source.put("fresh1", _batch(1, policy_step=1))
    trainer.train_step()
    source.put("stale", _batch(2, policy_step=0))  # step 2 accepts policies 1 and 2
    source.put("fresh2", _batch(3, policy_step=1))
    metrics = trainer.train_step()
    assert metrics.dropped_stale_groups == 2
    assert metrics.files_consumed == 2
    assert metrics.staleness_mean == 1.0


def test_zero_advantage_groups_are_dropped_and_the_trainer_waits_for_a_full_batch(tmp_path):
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path), _model(), source)
    trainer.start()
    source.put("all-correct", _batch(0, rewards=[1.0] * G))
    source.put("half", _batch(1, groups=1))
    with pytest.raises(TrainerStarved):
        trainer.train_step()  # only one informative group of the two needed
    source.put("more", _batch(2, groups=1))
    metrics = trainer.train_step()
    assert metrics.dropped_zero_advantage_groups == 2
    assert metrics.files_consumed == 3
    assert metrics.batch_reward == pytest.approx(0.5)


def test_a_run_of_uninformative_files_is_reported_in_a_warning_and_in_the_starvation_error(tmp_path, caplog):
    from trainer.loop import UNINFORMATIVE_WARNING_FILES

    source = InMemorySource()
    trainer = Trainer(_config(tmp_path), _model(), source)
    trainer.start()
    for i in range(UNINFORMATIVE_WARNING_FILES):
        source.put(f"solved-{i}", _batch(i, rewards=[1.0] * G))
    with caplog.at_level("WARNING", logger="proofswarm.trainer"), \
            pytest.raises(TrainerStarved, match=f"the last {UNINFORMATIVE_WARNING_FILES} files had no informative"):
        trainer.train_step()
    assert any(f"{UNINFORMATIVE_WARNING_FILES} files in a row had no informative group" in r.getMessage()
               for r in caplog.records)
    source.put("half", _batch(100, groups=2))  # an informative file: training goes on
    assert trainer.train_step().dropped_zero_advantage_groups == 2 * UNINFORMATIVE_WARNING_FILES


def test_kl_without_a_reference_model_is_refused(tmp_path):
    with pytest.raises(ValueError, match="reference"):
        Trainer(_config(tmp_path, loss={"kl_coef": 0.1}), _model(), InMemorySource())


def test_files_sampled_with_other_settings_are_rejected_and_counted(tmp_path):
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path), _model(), source)
    trainer.start()
    other = _batch(0)
    source.put("hot", other.model_copy(update={"header": other.header.model_copy(update={"sampling": SAMPLING.model_copy(update={"temperature": 0.5})})}))
    source.put("good", _batch(1))
    metrics = trainer.train_step()
    assert metrics.rejected_files == 1
    assert metrics.files_consumed == 2


def test_staleness_is_counted_at_consumption_and_the_is_weight_corrects_it(tmp_path):
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path, async_level=2, max_steps=10, optim={"lr": 1e-2, "warmup_steps": 0}),
                      _model(), source)
    trainer.start()
    source.put("fresh", _batch(0, policy_step=0))
    first = trainer.train_step()
    assert first.staleness_histogram == {"0": 2} and first.submission_staleness == [0]
    assert first.is_weight_mean == pytest.approx(1.0) and first.clipped_fraction == 0.0
    source.put("late", _batch(1, policy_step=0, groups=1))
    source.put("recent", _batch(2, policy_step=1, groups=1))
    second = trainer.train_step()
    assert second.staleness_histogram == {"0": 1, "1": 1}
    assert sorted(second.submission_staleness) == [0, 1]
    # made with policy 0 and accepted only now (a slow verdict): consumed at step 2, two steps old
    source.put("older", _batch(3, policy_step=0))
    third = trainer.train_step()
    assert third.staleness_histogram == {"2": 2}
    assert third.submission_staleness == [2]
    assert third.is_weight_mean != pytest.approx(1.0, abs=1e-4)  # π_prox moved away from π_behav
    assert 0 < third.is_weight_mean <= trainer.config.loss.is_weight_cap
    assert third.clipped_fraction == 0.0


def test_a_group_of_identical_non_dyadic_rewards_is_not_trained_on(tmp_path):
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path), _model(), source)
    trainer.start()
    source.put("seven-tenths", _batch(0, rewards=[0.7] * G))
    source.put("informative", _batch(1))
    metrics = trainer.train_step()
    assert metrics.dropped_zero_advantage_groups == 2
    assert metrics.batch_reward == pytest.approx(0.5)


def test_several_updates_per_step_clip_against_the_policy_at_the_start_of_the_step(tmp_path):
    """With one update per step π_θ = π_prox where the gradient is taken: nothing is clipped.
    With four, the later mini-batches see π_θ moved by the earlier updates, and a large learning
    rate moves it past 1 ± ε for some tokens: the clip binds (the trust region around π_prox)."""
    def first_step(updates):
        source = InMemorySource()
        config = _config(tmp_path / f"u{updates}", batch_samples=4 * G,
                         optim={"lr": 0.05, "warmup_steps": 0, "updates_per_step": updates})
        trainer = Trainer(config, _model(), source)
        trainer.start()
        source.put("a", _batch(0, groups=4))
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        metrics = trainer.train_step()
        return trainer, metrics, before

    _, one, _ = first_step(1)
    assert one.clipped_fraction == 0.0 and one.mean_ratio == pytest.approx(1.0)
    trainer, four, before = first_step(4)
    assert four.clipped_fraction > 0.0
    assert four.mean_ratio != pytest.approx(1.0, abs=1e-4)
    assert four.is_weight_mean == pytest.approx(1.0)  # fresh rollouts: π_behav = π_prox, w = 1
    assert trainer.scheduler.last_epoch == 1  # the schedule advances once per trainer step
    assert four.lr == pytest.approx(0.05)
    moved = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert moved


def test_updates_per_step_one_is_the_single_update_step(tmp_path):
    """updates_per_step = 1 takes exactly the step it took before the option existed: the same
    parameters as a hand-written single AdamW update on the whole batch's loss."""
    from trainer.advantages import group_advantages
    from trainer.batching import pack
    from trainer.loss import grpo_loss, token_logprobs

    source = InMemorySource()
    config = _config(tmp_path, optim={"lr": 1e-2, "warmup_steps": 0, "updates_per_step": 1})
    trainer = Trainer(config, _model(), source)
    trainer.start()
    reference = _model()
    reference.load_state_dict(trainer.model.state_dict())
    batch = _batch(0)
    source.put("a", batch)
    trainer.train_step()

    optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2, betas=config.optim.betas, weight_decay=0.0)
    rewards = torch.tensor([s.reward for s in batch.samples]).view(-1, G)
    advantages = group_advantages(rewards).float().flatten()
    packed = pack([s.prompt_ids for s in batch.samples], [s.completion_ids for s in batch.samples],
                  pad_id=reference.config.pad_token_id or 0)
    reference.train()
    logits = reference(input_ids=packed.inputs).logits
    logp = token_logprobs(logits.detach(), packed.targets, 1.0)
    out = grpo_loss(logits, packed.targets, packed.loss_mask, advantages, logp, 1.0, config.token_budget,
                    config.loss, logp_prox=logp)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), config.optim.max_grad_norm)
    optimizer.step()
    for (name, mine), theirs in zip(trainer.model.state_dict().items(), reference.state_dict().values(), strict=True):
        assert torch.allclose(mine, theirs, atol=1e-5), name


def test_a_waiting_trainer_says_what_it_has_and_what_it_lacks(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr("trainer.loop.WAITING_LOG_S", 0.0)
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path, wait_timeout_s=0.2), _model(), source)
    trainer.start()
    source.put("solved", _batch(0, rewards=[1.0] * G))
    source.put("half", _batch(1, groups=1))
    with caplog.at_level("INFO", logger="proofswarm.trainer"), pytest.raises(TrainerStarved):
        trainer.train_step()
    lines = [r.getMessage() for r in caplog.records if "waiting for work" in r.getMessage()]
    assert lines and lines[-1] == ("step 1: waiting for work: 1 of the 2 informative groups a batch needs (files taken 2; "
                                   "groups dropped: 2 all-equal rewards, 0 stale)")


def test_daemon_logs_can_be_json_lines(capsys):
    import argparse
    import json
    import logging

    from cli.options import add_log_args, configure_logging

    parser = argparse.ArgumentParser()
    add_log_args(parser)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging(parser.parse_args(["--log-format", "json", "--log-level", "warning"]))
        logging.getLogger("proofswarm.worker").info("not shown")
        logging.getLogger("proofswarm.worker").warning("slashed %d times", 2)
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
        assert [(x["level"], x["logger"], x["msg"]) for x in lines] == [("warning", "proofswarm.worker", "slashed 2 times")]
    finally:
        root.handlers[:], root.level = saved[0], saved[1]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_past_policys_logp_behav_is_its_retained_copys_and_the_training_weights_come_back_bit_for_bit(tmp_path, dtype):
    """A retained policy is the weights cast to `retained_dtype` (what a worker running that dtype computes with);
    logp_behav of its rows is those weights' log-probabilities, recomputed with the training model itself."""
    model = _model()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    source = InMemorySource()
    trainer = Trainer(_config(tmp_path, retained_dtype=str(dtype).removeprefix("torch."),
                              optim={"lr": 1e-2, "warmup_steps": 0}), model, source)
    trainer.start()
    source.put("a", _batch(0))
    trainer.train_step()  # now at step 1: policy 0 is a past one
    assert all(t.dtype == dtype for t in trainer.policies[0].values())
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    batch = _batch(1)
    packed = pack([s.prompt_ids for s in batch.samples], [s.completion_ids for s in batch.samples], pad_id=0)
    rows = len(batch.samples)
    logp_behav = trainer._behaviour_logprobs([0] * rows, [0] * rows, packed)
    policy_0 = _model()
    policy_0.load_state_dict({k: v.to(dtype).float() for k, v in initial.items()})
    assert torch.equal(logp_behav, completion_logprobs(policy_0.eval(), packed, SAMPLING.temperature))
    assert all(torch.equal(model.state_dict()[k], trained[k]) for k in trained)
    assert any(not torch.equal(trained[k], initial[k]) for k in trained)  # the step did move the weights
