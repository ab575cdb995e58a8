"""The RL loop learns, through the real parts: a tiny real Qwen2 saved to a folder, a real rollout
engine generating with its LoRA adapter, GRPO on verl's estimator and loss, two Ray Train update
workers sharding the policy with FSDP2 over gloo, and every step's adapter pushed to the engine
and checked with a probe. The task is verifiable and not about kernels (``cudarl.rl.toy``): the
share of response tokens drawn from a target set, about 0.15 for the random model."""

from __future__ import annotations

import pytest

from cudarl.rl.toy import ToySettings, train_toy
from tests.fixtures.tiny_lm import tiny_model, tiny_tokenizer


@pytest.mark.slow
def test_grpo_through_ray_train_and_fsdp2_raises_the_reward(tmp_path, shared_ray):
    tokenizer = tiny_tokenizer(128)
    tiny_model(tokenizer).save_pretrained(tmp_path / "model")
    log = train_toy(str(tmp_path / "model"), len(tokenizer), ToySettings(steps=20, ranks=2))
    rewards = [entry.mean_reward for entry in log]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert first < 0.3 and last > 0.7, rewards
    # every step's samples came from the weights of the step before, and every sync was checked
    assert [entry.weights_version for entry in log] == list(range(20))
    assert [entry.synced_version for entry in log] == list(range(1, 21))
    assert all(entry.probe_mean_error < 1e-4 for entry in log)
    settings = ToySettings()
    every = settings.prompts_per_step * settings.group_size  # the metrics cover both ranks' shares
    assert all(entry.metrics["samples"] == every and abs(entry.metrics["ppo_kl"]) < 1e-3 for entry in log)  # on-policy
