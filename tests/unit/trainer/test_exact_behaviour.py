"""An exact pool's off-policy correction divides by what sampled: the integer policy's probabilities under exact
mode's sampling rule (trainer/exact_behaviour.py), for every row, the current policy's too."""

from __future__ import annotations

import math

import pytest
import torch

from inference import exact
from tests.unit.trainer.test_trainer import SAMPLING, _batch, _config, _model
from trainer.batching import completion_logprobs, pack
from trainer.exact_behaviour import ExactBehaviour, rule_logprobs
from trainer.loop import Trainer
from trainer.work_source import InMemorySource


def test_the_rule_draws_tokens_as_often_as_its_log_probabilities_say() -> None:
    logits = torch.tensor([[0, 30_000, 65_536, -40_000, 90_000]], dtype=torch.int64)  # Q16: 0, 0.46, 1, -0.61, 1.37
    temperature, draws = 0.7, 40_000
    seeds = torch.arange(draws, dtype=torch.int64)
    tokens = exact.sample_fixed(logits.expand(draws, -1), seeds, 3, temperature)
    frequency = torch.bincount(tokens, minlength=5).double() / draws
    expected = rule_logprobs(logits.expand(5, -1), torch.arange(5), temperature).double().exp()
    assert expected.sum().item() == pytest.approx(1.0, abs=1e-6)
    # 4 standard errors of a frequency near 0.3 over 40,000 draws: 0.009; the fixed seeds make it one fixed outcome
    assert torch.allclose(frequency, expected, atol=0.01), (frequency, expected)


def test_a_temperature_with_no_sampling_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="no exact-mode sampling distribution"):
        rule_logprobs(torch.zeros((1, 3), dtype=torch.int64), torch.zeros(1, dtype=torch.int64), 0.0)


def test_each_completion_token_gets_the_integer_policys_log_probability_and_nothing_else_does() -> None:
    model = _model()
    batch = _batch(seed=3)
    prompts = [s.prompt_ids for s in batch.samples]
    completions = [s.completion_ids for s in batch.samples]
    packed = pack(prompts, completions, pad_id=0)
    behaviour = ExactBehaviour(SAMPLING.temperature)
    logp = behaviour.logprobs(0, lambda: model, packed)
    assert torch.isnan(logp[packed.loss_mask == 0]).all() and not torch.isnan(logp[packed.loss_mask == 1]).any()
    policy = exact.quantise_policy(model)
    for row, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        expected = rule_logprobs(exact.prefill_logits(policy, prompt, completion), torch.tensor(completion),
                                 SAMPLING.temperature)
        assert torch.equal(logp[row][packed.loss_mask[row] == 1], expected)
    # close to the float policy's (the quantisation is small) but not it: the correction is for what sampled
    floats = completion_logprobs(model, packed, SAMPLING.temperature, 10_000)
    gap = (logp - floats)[packed.loss_mask == 1].abs()
    assert 0 < gap.max().item() < 0.05


def test_the_trainer_weights_even_current_policy_rows_by_the_integer_policy_and_quantises_each_step_once(tmp_path):
    quantised = []

    class CountingBehaviour(ExactBehaviour):
        def prepare(self, step, model_of_step):
            return super().prepare(step, lambda: quantised.append(step) or model_of_step())

    def first_step(exact_behaviour):
        source = InMemorySource()
        trainer = Trainer(_config(tmp_path / str(exact_behaviour is None)), _model(), source,
                          exact_behaviour=exact_behaviour)
        trainer.start()
        source.put("a", _batch(0))  # sampled by step 0: the current policy when step 1 trains
        trainer.train_step()
        return trainer, trainer.step_metrics

    _, floats = first_step(None)
    assert floats["is_weight_min"] == floats["is_weight_max"] == 1.0  # π_behav = π_prox for the current policy's rows
    trainer, exacts = first_step(CountingBehaviour(SAMPLING.temperature))
    assert exacts["is_weight_min"] < 1.0 < exacts["is_weight_max"] and math.isfinite(exacts["loss"])
    for name, policy_step in (("b", 1), ("c", 0)):
        trainer.source.put(name, _batch(len(quantised) + 1, policy_step=policy_step))
        trainer.train_step()
    assert quantised == [0, 1]  # each step's integer policy built once, when a row of it first came
