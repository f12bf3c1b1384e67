"""The GRPO loss, advantages and online filters against hand-computed values."""

import math
from fractions import Fraction

import pytest
import torch

from tasks.rewards import canonical_reward
from trainer.advantages import group_advantages
from trainer.filtering import informative_groups, is_stale
from trainer.loss import LossConfig, clipped_token_loss, grpo_loss, k3_kl, token_logprobs, truncated_is_weight


def _token(ratio: float, advantage: float, epsilon: float = 0.2, delta: float = 4.0):
    """Loss and d loss / d logp of one token whose ratio is `ratio`."""
    logp = torch.tensor([math.log(ratio)], requires_grad=True)
    loss, _ = clipped_token_loss(logp, torch.zeros(1), torch.tensor([advantage]), epsilon, delta)
    loss.sum().backward()
    return float(loss.detach()), float(logp.grad)


@pytest.mark.parametrize(
    ("ratio", "advantage", "expected_loss", "expected_grad"),
    [
        (1.0, 1.0, -1.0, -1.0),  # on-policy: −A, gradient −r·A
        (1.5, 1.0, -1.2, 0.0),  # A > 0, r above 1+ε: clipped, no gradient
        (0.5, 1.0, -0.5, -0.5),  # A > 0, r below 1−ε: unclipped side is the pessimistic one
        (1.5, -1.0, 1.5, 1.5),  # A < 0, r above 1+ε but below δ: unclipped
        (0.5, -1.0, 0.8, 0.0),  # A < 0, r below 1−ε: clipped at 1−ε
        (10.0, -1.0, 4.0, 0.0),  # A < 0, r above δ: clamped to δ = 4, no gradient
        (6.0, -2.0, 8.0, 0.0),  # δ·|A|
        (10.0, 1.0, -1.2, 0.0),  # δ changes nothing for A > 0
    ],
)
def test_clipped_token_loss_matches_hand_computed_values(ratio, advantage, expected_loss, expected_grad):
    loss, grad = _token(ratio, advantage)
    assert loss == pytest.approx(expected_loss, abs=1e-5)
    assert grad == pytest.approx(expected_grad, abs=1e-5)


def test_without_delta_a_negative_advantage_token_with_exploded_ratio_is_unbounded():
    bounded, _ = _token(10.0, -1.0, delta=4.0)
    unbounded, _ = _token(10.0, -1.0, delta=1e9)
    assert bounded == pytest.approx(4.0)
    assert unbounded == pytest.approx(10.0, rel=1e-5)


def test_logits_are_divided_by_the_temperature():
    logits = torch.tensor([[[0.0, 2 * math.log(3.0)]]])
    logp = token_logprobs(logits, torch.tensor([[1]]), temperature=2.0)
    assert float(logp) == pytest.approx(math.log(0.75), abs=1e-6)


def test_token_level_normalisation_divides_by_the_constant_budget():
    logits = torch.zeros(2, 3, 4)  # uniform over 4 tokens: r = 1 against the same logp_old
    targets = torch.zeros(2, 3, dtype=torch.long)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    logp_old = torch.full((2, 3), -math.log(4.0))
    out = grpo_loss(logits, targets, mask, torch.tensor([1.0, -0.5]), logp_old, 1.0, 10, LossConfig())
    # (−1 − 1 + 0.5) / 10: each token weighs 1/budget whatever its sequence's length
    assert out.policy_loss == pytest.approx(-0.15, abs=1e-6)
    assert float(out.loss) == pytest.approx(-0.15, abs=1e-6)
    assert out.entropy == pytest.approx(math.log(4.0), abs=1e-6)
    assert out.mean_ratio == pytest.approx(1.0)


def test_entropy_bonus_lowers_the_loss_by_coef_times_budget_normalised_entropy():
    logits = torch.zeros(1, 2, 4)
    out = grpo_loss(
        logits, torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2), torch.tensor([0.0]),
        torch.full((1, 2), -math.log(4.0)), 1.0, 4, LossConfig(entropy_coef=0.1),
    )
    assert float(out.loss) == pytest.approx(-0.1 * 2 * math.log(4.0) / 4, abs=1e-6)


def test_k3_kl_matches_hand_computed_value_and_enters_the_loss():
    assert float(k3_kl(torch.tensor(math.log(0.5)), torch.tensor(math.log(0.25)))) == pytest.approx(
        0.5 + math.log(2.0) - 1.0, abs=1e-6
    )
    assert float(k3_kl(torch.tensor(-1.3), torch.tensor(-1.3))) == 0.0
    logits = torch.zeros(1, 1, 2)  # logp = ln 0.5
    logp_ref = torch.full((1, 1), math.log(0.25))
    out = grpo_loss(
        logits, torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1), torch.tensor([0.0]),
        torch.full((1, 1), math.log(0.5)), 1.0, 2, LossConfig(kl_coef=0.5), logp_ref=logp_ref,
    )
    assert float(out.loss) == pytest.approx(0.5 * (0.5 + math.log(2.0) - 1.0) / 2, abs=1e-6)


def test_kl_without_a_reference_is_refused():
    with pytest.raises(ValueError, match="logp_ref"):
        grpo_loss(torch.zeros(1, 1, 2), torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1),
                  torch.zeros(1), torch.zeros(1, 1), 1.0, 1, LossConfig(kl_coef=0.1))


def test_group_advantages_standardise_within_each_group():
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 3.0]]))
    assert adv[0].tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)
    # mean 0.75, population std sqrt(1.6875)
    std = math.sqrt(1.6875)
    assert adv[1].tolist() == pytest.approx([-0.75 / std] * 3 + [2.25 / std], abs=1e-5)


def test_zero_advantage_groups_are_dropped_and_counted():
    result = informative_groups(torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [0.5, 0.5]]))
    assert result.keep == [1]
    assert result.dropped_zero_advantage == 3
    assert result.advantages[0].abs().sum() == 0


def test_identical_non_dyadic_rewards_get_exactly_zero_advantage_and_are_dropped():
    rewards = torch.full((1, 16), 0.7)
    # float64 arithmetic: the mean of 16 copies of a float32 value is that value (was: rounding error > 0.01)
    assert group_advantages(rewards).abs().max() == 0
    result = informative_groups(rewards)
    assert result.keep == []
    assert result.dropped_zero_advantage == 1
    assert result.advantages.abs().sum() == 0


def test_any_difference_between_exact_rewards_is_informative_and_tolerances_are_refused():
    # two correct answers, 1 token apart under the 3/10000-per-token length penalty
    rewards = torch.tensor([[canonical_reward(1 - Fraction(3, 10_000) * 2), canonical_reward(1 - Fraction(3, 10_000) * 3)],
                            [0.0, 0.0]])
    result = informative_groups(rewards)
    assert result.keep == [0]
    assert result.advantages[0].tolist() == pytest.approx([1.0, -1.0], abs=1e-2)
    # was: a spread within 1e-6 counted as no spread (an all-wrong group shifted by 0.999e-6 passed the
    # validator's tolerance and was kept); now the validator refuses the shift, and a real spread is never lost
    assert informative_groups(torch.tensor([[0.7, 0.7 + 1e-7]])).keep == [0]
    assert informative_groups(rewards, tol=0).keep == [0]
    with pytest.raises(ValueError, match="exactly"):
        informative_groups(rewards, tol=1e-6)


def test_is_weight_is_truncated_at_the_cap():
    logp_behav = torch.log(torch.tensor([0.5, 0.25, 0.1]))
    logp_prox = torch.log(torch.tensor([0.25, 0.25, 0.5]))  # ratios 0.5, 1, 5
    weight, raw = truncated_is_weight(logp_prox, logp_behav, cap=2.0)
    assert weight.tolist() == pytest.approx([0.5, 1.0, 2.0], abs=1e-6)
    assert raw.tolist() == pytest.approx([0.5, 1.0, 5.0], abs=1e-5)


def test_a_truncated_is_weight_scales_the_token_gradient_by_the_cap():
    def grad_of_logits(logp_behav_shift: float, cap: float):
        logits = torch.tensor([[[0.3, -0.2, 0.1]]], requires_grad=True)
        targets = torch.tensor([[0]])
        logp_behav = token_logprobs(logits.detach(), targets, 1.0) - logp_behav_shift  # π_prox/π_behav = e^shift
        out = grpo_loss(logits, targets, torch.ones(1, 1), torch.tensor([1.0]), logp_behav, 1.0, 1,
                        LossConfig(is_weight_cap=cap))
        out.loss.backward()
        return logits.grad, out

    on_policy, out_fresh = grad_of_logits(0.0, cap=2.0)
    stale, out_stale = grad_of_logits(math.log(5.0), cap=2.0)  # raw weight 5, truncated to 2
    assert torch.allclose(stale, 2.0 * on_policy, atol=1e-6)
    assert out_stale.is_weight_max == out_stale.is_weight_min == pytest.approx(5.0, rel=1e-5)
    assert out_stale.is_truncated_fraction == 1.0 and out_fresh.is_truncated_fraction == 0.0
    assert out_stale.is_weight_mean == pytest.approx(2.0)
    assert out_stale.clipped_fraction == 0.0  # r = π_θ/π_prox = 1: a stale token is not clipped


def _coupled_reference_loss(logits, targets, mask, advantages, logp_old, budget, epsilon=0.2, delta=4.0):
    """The loss before decoupling: r = π_θ/π_old, no IS weight, written out independently."""
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    r = torch.exp(logp - logp_old)
    c1 = r.clamp(0.0, delta)
    c2 = c1.clamp(1 - epsilon, 1 + epsilon)
    a = advantages.unsqueeze(-1)
    return (torch.maximum(-c1 * a, -c2 * a) * mask).sum() / budget


def test_decoupled_loss_equals_the_coupled_one_when_proximal_and_behaviour_policies_agree():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 5, 7, generator=gen)
    targets = torch.randint(0, 7, (4, 5), generator=gen)
    mask = (torch.rand(4, 5, generator=gen) > 0.2).float()
    advantages = torch.randn(4, generator=gen)
    logp_now = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    logp_old = logp_now + 0.6 * torch.randn(4, 5, generator=gen)  # ratios on both sides of the clip range
    a = logits.clone().requires_grad_(True)
    b = logits.clone().requires_grad_(True)
    out = grpo_loss(a, targets, mask, advantages, logp_old, 1.0, 20, LossConfig(), logp_prox=logp_old)
    reference = _coupled_reference_loss(b, targets, mask, advantages, logp_old, 20)
    out.loss.backward()
    reference.backward()
    assert 0.1 < out.clipped_fraction < 0.9
    assert float(out.loss.detach()) == pytest.approx(float(reference.detach()), abs=1e-6)
    assert torch.allclose(a.grad, b.grad, atol=1e-6)
    assert out.is_weight_mean == pytest.approx(1.0)


def test_staleness_bound_is_async_level_steps():
    assert not is_stale(policy_step=8, trainer_step=10, async_level=2)
    assert is_stale(policy_step=7, trainer_step=10, async_level=2)
    assert is_stale(policy_step=9, trainer_step=10, async_level=0)
    assert not is_stale(policy_step=10, trainer_step=10, async_level=0)
    with pytest.raises(ValueError):
        is_stale(0, 0, -1)
