"""Advantages and the policy loss (``cudarl.rl``, on verl's ``core_algos``) against hand-computed
values, and the loss's exactness across data-parallel ranks."""

from __future__ import annotations

import math

import pytest
import torch

from cudarl.config_rl import AlgorithmConfig
from cudarl.rl.advantages import compute_advantages
from cudarl.rl.loss import BatchCounts, policy_loss, policy_loss_names


def test_grpo_normalizes_within_a_group_and_a_lone_sample_gets_nothing():
    result = compute_advantages([1, 0, 0, 1, 5], ["a", "a", "a", "a", "b"], [0] * 5, "grpo")
    # group a: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735; b is alone
    assert result.values == pytest.approx([0.866025, -0.866025, -0.866025, 0.866025, 0.0], abs=1e-5)
    assert result.alone == 1


def test_grpo_unscaled_only_subtracts_the_mean():
    result = compute_advantages([1, 0, 0, 1], ["a"] * 4, [0] * 4, "grpo_unscaled")
    assert result.values == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_a_group_of_equal_returns_has_no_advantage():
    assert compute_advantages([2, 2, 2], ["a"] * 3, [0] * 3, "grpo").values == (0.0, 0.0, 0.0)


def test_rloo_compares_each_sample_with_the_mean_of_the_others():
    result = compute_advantages([3, 1, 2], ["a"] * 3, [0] * 3, "rloo")
    assert result.values == pytest.approx([3 - 1.5, 1 - 2.5, 2 - 2.0])


def test_trloo_compares_a_turn_with_the_same_turn_of_the_other_rollouts():
    # rollout 1: turns 0, 1, 2; rollout 2: turns 0, 1; rollout 3: turn 0 only
    returns = [1.32, 0.8, 2.0, 0.5, 1.0, 0.2]
    turns = [0, 1, 2, 0, 1, 0]
    result = compute_advantages(returns, ["task"] * 6, turns, "trloo")
    expected = [1.32 - (0.5 + 0.2) / 2, 0.8 - 1.0, 0.0, 0.5 - (1.32 + 0.2) / 2, 1.0 - 0.8, 0.2 - (1.32 + 0.5) / 2]
    assert result.values == pytest.approx(expected, abs=1e-6)
    assert result.alone == 1  # turn 2 has no peer
    # over the whole group instead (rloo), the same returns give other advantages
    assert compute_advantages(returns, ["task"] * 6, turns, "rloo").values != pytest.approx(expected, abs=1e-6)


def test_bad_advantage_input_is_refused():
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        compute_advantages([1.0], ["a"], [0], "ppo")
    with pytest.raises(ValueError, match="2 returns, 1 group ids"):
        compute_advantages([1.0, 2.0], ["a"], [0, 0], "grpo")
    assert compute_advantages([], [], [], "grpo").values == ()


def _row(*values: float) -> torch.Tensor:
    return torch.tensor([list(values)], dtype=torch.float64)


def test_the_ppo_loss_inside_the_clip_range_is_minus_ratio_times_advantage():
    logprobs, old = _row(-1.0, -2.0, -0.5), _row(-1.1, -1.5, -0.5)
    loss, metrics = policy_loss(logprobs, old, torch.ones(1, 3, dtype=torch.float64), _row(1, 1, 0),
                                AlgorithmConfig(), BatchCounts(tokens=2, sequences=1))
    # ratios e^0.1 and e^-0.5; the second is under 0.8 but clipping only binds where it lowers the objective
    assert float(loss) == pytest.approx(-(math.exp(0.1) + math.exp(-0.5)) / 2)
    assert metrics["ppo_kl"] == pytest.approx((-0.1 + 0.5) / 2)
    assert metrics["pg_clipfrac"] == 0.0


def test_clip_high_and_the_dual_clip_bound_the_loss():
    logprobs = _row(0.5, math.log(0.5), math.log(5.0))
    advantages = _row(1.0, -1.0, -1.0)
    loss, metrics = policy_loss(logprobs, torch.zeros(1, 3, dtype=torch.float64), advantages, _row(1, 1, 1),
                                AlgorithmConfig(), BatchCounts(tokens=3, sequences=1))
    # token 1: ratio e^0.5 = 1.65 > 1.28 with A > 0 -> -1.28; token 2: ratio 0.5 < 0.8 with A < 0 ->
    # max(0.5, 0.8) = 0.8; token 3: ratio 5 with A < 0 -> max(5, 1.28) = 5, dual-clipped to 3
    assert float(loss) == pytest.approx((-1.28 + 0.8 + 3.0) / 3)
    assert metrics["pg_clipfrac"] == pytest.approx(2 / 3)
    assert metrics["pg_clipfrac_lower"] == pytest.approx(1 / 3)


def test_the_kl_penalty_is_added_with_its_weight():
    logprobs = _row(-1.0, -2.0)
    ref = logprobs + 0.2
    config = AlgorithmConfig(kl_coef=0.5, kl_type="low_var_kl")
    loss, metrics = policy_loss(logprobs, logprobs, torch.zeros(1, 2, dtype=torch.float64), _row(1, 1), config,
                                BatchCounts(tokens=2, sequences=1), ref_logprobs=ref)
    # low-variance KL (k3): e^(ref - lp) - (ref - lp) - 1 = e^0.2 - 1.2 per token; the policy term is 0
    assert metrics["kl"] == pytest.approx(math.exp(0.2) - 1.2)
    assert float(loss) == pytest.approx(0.5 * (math.exp(0.2) - 1.2))
    with pytest.raises(ValueError, match="reference policy's log-probs"):
        policy_loss(logprobs, logprobs, logprobs, _row(1, 1), config, BatchCounts(tokens=2, sequences=1))


def test_token_mean_over_two_ranks_gives_the_single_process_gradient():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    old = torch.randn(2, 4, dtype=torch.float64)
    advantages = torch.tensor([[1.0] * 4, [-2.0] * 4], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.float64)  # 3 tokens and 1 token
    config = AlgorithmConfig()

    whole, _ = policy_loss(logits, old, advantages, mask, config, BatchCounts(tokens=4, sequences=2))
    (expected,) = torch.autograd.grad(whole, logits)

    def ranks_gradient(counts_of_rank) -> torch.Tensor:
        total = 0
        for rank in (0, 1):  # each rank its own sample; the all-reduce averages the two gradients
            rows = slice(rank, rank + 1)
            loss, _ = policy_loss(logits[rows], old[rows], advantages[rows], mask[rows], config, counts_of_rank(rank))
            total = total + loss / 2
        return torch.autograd.grad(total, logits)[0]

    assert torch.allclose(ranks_gradient(lambda rank: BatchCounts(tokens=4, sequences=2, ranks=2)), expected)
    # each rank normalizing by its own token count weighs the lone token of rank 1 three times as much
    local = ranks_gradient(lambda rank: BatchCounts(tokens=int(mask[rank].sum()), sequences=1, ranks=1))
    assert not torch.allclose(local, expected)


@pytest.mark.parametrize("name", ["gspo", "geo_mean", "cispo", "clip_cov", "kl_cov"])
def test_every_offered_policy_loss_is_registered_in_verl_and_differentiable(name):
    assert name in policy_loss_names()
    logprobs = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    loss, _ = policy_loss(logprobs, torch.tensor([[-1.1, -1.5, -0.5]]), torch.ones(1, 3), torch.tensor([[1, 1, 0]]),
                          AlgorithmConfig(policy_loss=name), BatchCounts(tokens=2, sequences=1))
    loss.backward()
    assert torch.isfinite(loss) and logprobs.grad[0, :2].abs().sum() > 0


def test_mismatched_shapes_and_empty_counts_are_refused():
    ones = torch.ones(1, 3)
    with pytest.raises(ValueError, match="differ in shape"):
        policy_loss(ones, ones, torch.ones(1, 2), ones, AlgorithmConfig(), BatchCounts(tokens=3, sequences=1))
    with pytest.raises(ValueError, match="must be positive"):
        policy_loss(ones, ones, ones, ones, AlgorithmConfig(), BatchCounts(tokens=0, sequences=1))
