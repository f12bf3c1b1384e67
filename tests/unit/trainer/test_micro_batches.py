"""Micro-batched gradient accumulation gives the whole batch's loss, statistics, gradient and update."""

import dataclasses
import random

import pytest
import torch

from inference.tiny import build_tiny_llama
from protocol.rollouts import RolloutBatch, RolloutHeader, RolloutSample
from protocol.runspec import SamplingSpec
from protocol.submission import local_binding
from trainer.batching import micro_batches, pack
from trainer.config import TrainerConfig
from trainer.loop import Trainer
from trainer.loss import LossConfig, grpo_loss, merge_loss_outputs
from trainer.work_source import InMemorySource

VOCAB = 24
G = 4
SAMPLING = SamplingSpec(group_size=G, temperature=0.9, max_tokens=6)
LOSS = LossConfig(entropy_coef=0.01, kl_coef=0.05)  # every term of the loss has a gradient


def _model(seed=1):
    return build_tiny_llama(VOCAB, seed=seed, hidden=16, layers=1, heads=2)


def _batch(seed: int, policy_step: int, groups: int = 2) -> RolloutBatch:
    rng = random.Random(seed)
    header = RolloutHeader.bound(local_binding("0x" + "ab" * 20, policy_step, 0), manifest_digest="0x" + "00" * 32,
                                 task={"name": "test"}, sampling=SAMPLING, proof_chunk=0)
    samples = []
    for g in range(groups):
        prompt = [1] + [rng.randrange(4, VOCAB) for _ in range(rng.randint(2, 5))]
        for s in range(G):
            n = rng.randint(1, 6)
            samples.append(RolloutSample(
                group=g, sample=s, prompt_index=g, prompt_ids=prompt,
                completion_ids=[rng.randrange(4, VOCAB) for _ in range(n)], logprobs=[-1.0] * n,
                reward=float(rng.random()), finish_reason="length" if n == 6 else "eos", seed=s, proofs=[]))
    return RolloutBatch(header=header, samples=samples)


def test_micro_batches_cover_every_row_once_within_the_budget():
    packed = pack([[1, 2, 3]] * 7, [[4, 5, 6, 7]] * 7, pad_id=0)  # width 6
    assert micro_batches(packed, 12) == [slice(0, 2), slice(2, 4), slice(4, 6), slice(6, 7)]
    assert micro_batches(packed, 1) == [slice(i, i + 1) for i in range(7)]  # a row never splits
    assert micro_batches(packed, 10_000) == [slice(0, 7)]
    with pytest.raises(ValueError):
        micro_batches(packed, 0)


def test_merged_micro_batch_losses_equal_the_whole_batch_loss_and_gradient():
    torch.manual_seed(0)
    rows, width = 6, 9
    logits = torch.randn(rows, width, VOCAB)
    targets = torch.randint(0, VOCAB, (rows, width))
    mask = (torch.rand(rows, width) > 0.3).float()
    mask[2] = 0.0  # a micro-batch may hold no completion token
    advantages = torch.randn(rows)
    logp_behav = torch.log_softmax(logits + 0.5 * torch.randn_like(logits), -1).gather(-1, targets[..., None])[..., 0]
    logp_ref = logp_behav - 0.1
    logp_prox = torch.log_softmax(logits + 0.1 * torch.randn_like(logits), -1).gather(-1, targets[..., None])[..., 0]
    args = {"temperature": 0.9, "token_budget": 40, "config": LOSS}

    whole_logits = logits.clone().requires_grad_()
    whole = grpo_loss(whole_logits, targets, mask, advantages, logp_behav, logp_ref=logp_ref, logp_prox=logp_prox,
                      **args)
    whole.loss.backward()

    split_logits = logits.clone().requires_grad_()
    parts = []
    for rs in (slice(0, 2), slice(2, 3), slice(3, 6)):
        part = grpo_loss(split_logits[rs], targets[rs], mask[rs], advantages[rs], logp_behav[rs],
                         logp_ref=logp_ref[rs], logp_prox=logp_prox[rs], **args)
        part.loss.backward()
        parts.append(part)
    merged = merge_loss_outputs(parts)

    torch.testing.assert_close(split_logits.grad, whole_logits.grad, rtol=1e-5, atol=1e-7)
    for field in dataclasses.fields(whole):
        a, b = getattr(merged, field.name), getattr(whole, field.name)
        a, b = (float(x.detach()) if isinstance(x, torch.Tensor) else float(x) for x in (a, b))
        assert a == pytest.approx(b, rel=1e-5, abs=1e-7), field.name
    assert whole.is_truncated_fraction > 0 and whole.clipped_fraction > 0  # the statistics are not all trivial


def _trainer(tmp_path, micro_batch_tokens):
    config = TrainerConfig(run_dir=tmp_path, sampling=SAMPLING, batch_samples=4 * G, async_level=3, max_steps=10,
                           wait_timeout_s=0.5, poll_interval_s=0.01, micro_batch_tokens=micro_batch_tokens, loss=LOSS,
                           optim={"lr": 1e-3, "warmup_steps": 0})
    return Trainer(config, _model(), InMemorySource(), reference=_model(seed=2))


def test_one_optimizer_step_over_micro_batches_gives_the_whole_batch_update(tmp_path):
    whole = _trainer(tmp_path / "whole", micro_batch_tokens=100_000)
    rowwise = _trainer(tmp_path / "rowwise", micro_batch_tokens=1)  # one row per forward/backward
    for t in (whole, rowwise):
        t.start()
        t.source.put("a", _batch(0, policy_step=0, groups=4))
    first = [t.train_step() for t in (whole, rowwise)]
    for t in (whole, rowwise):  # a stale half: logp_behav from the retained policy 0, IS weights ≠ 1
        t.source.put("b", _batch(1, policy_step=0))
        t.source.put("c", _batch(2, policy_step=1))
    second = [t.train_step() for t in (whole, rowwise)]

    for a, b in zip(whole.model.state_dict().values(), rowwise.model.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for a, b in (first, second):
        for name in ("loss", "policy_loss", "entropy", "kl", "grad_norm", "mean_ratio", "is_weight_mean",
                     "is_weight_max", "logprob_mismatch"):
            assert getattr(b, name) == pytest.approx(getattr(a, name), rel=1e-5, abs=1e-7), name
    assert second[0].is_weight_mean != pytest.approx(1.0, abs=1e-4)
