"""Judged episodes to training samples and step statistics (``cudarl.rl.samples``), by hand."""

from __future__ import annotations

import pytest

from cudarl.agents.trajectory import Trajectory, TurnSample
from cudarl.config_rl import AlgorithmConfig, RewardConfig
from cudarl.rl.samples import build_samples
from cudarl.tester.verdict import Outcome
from tests.unit.test_reward import _verdict


def _episode(name: str, *turns: tuple[Outcome, float | None], version: int = 3) -> Trajectory:
    samples = tuple(TurnSample(role="generator" if i == 0 else "optimizer", prompt_ids=(1, 2, 3 + i),
                               response_ids=(7, 8), logprobs=(-0.5, -0.25), weights_version=version + i,
                               verdict=_verdict(outcome, speedup), candidate_hash="h", finished=True,
                               adapter="generator" if i == 0 else "optimizer")
                    for i, (outcome, speedup) in enumerate(turns))
    return Trajectory(task_id="relu", episode_id=name, turns=samples, context_mode="fresh", stopped_because="max_turns")


EPISODES = [
    _episode("a", (Outcome.PASSED, 2.0), (Outcome.INCORRECT, None)),  # rewards 1.5, 0 -> returns 1.5, 0
    _episode("b", (Outcome.COMPILE_ERROR, None), (Outcome.PASSED, 4.0)),  # rewards 0, 2.0 -> returns 0.8, 2.0
    _episode("c", (Outcome.HARNESS_ERROR, None)),  # left out
]
GROUPS = ["g", "g", "h"]


def test_turn_level_loo_advantages_from_discounted_returns():
    samples, stats = build_samples(EPISODES, GROUPS, RewardConfig(), AlgorithmConfig(advantage="trloo", gamma=0.4),
                                   trainer_version=5)
    assert [s.advantage for s in samples] == pytest.approx([1.5 - 0.8, 0 - 2.0, 0.8 - 1.5, 2.0 - 0.0])
    assert [(s.token_ids, s.prompt_length, s.old_logprobs) for s in samples[:2]] == [
        ((1, 2, 3, 7, 8), 3, (-0.5, -0.25)), ((1, 2, 4, 7, 8), 3, (-0.5, -0.25))]  # the engine's ids, untouched
    assert [(s.weights_version, s.adapter) for s in samples] == [(3, "generator"), (4, "optimizer")] * 2
    assert (stats.episodes, stats.turns, stats.samples, stats.alone) == (3, 5, 4, 0)
    assert stats.mean_reward == pytest.approx((1.5 + 0 + 0 + 2.0) / 4)
    assert (stats.pass_rate, stats.compile_rate) == (0.5, 0.75)
    assert (stats.mean_speedup, stats.median_speedup, stats.best_speedups) == (3.0, 3.0, (2.0, 4.0, None))
    assert stats.mean_turns == pytest.approx(5 / 3)
    assert stats.kinds == {"correct": 2, "incorrect": 1, "compile_failure": 1, "harness_error": 1}
    assert (stats.response_tokens, stats.version_lag) == (8, 2)


def test_grpo_over_all_turns_of_a_group():
    samples, _ = build_samples(EPISODES, GROUPS, RewardConfig(), AlgorithmConfig(advantage="grpo", gamma=0.4))
    # returns 1.5, 0, 0.8, 2.0: mean 1.075, unbiased std sqrt(2.2675 / 3) = 0.869387
    assert [s.advantage for s in samples] == pytest.approx([0.48885, -1.23650, -0.31632, 1.06397], abs=1e-4)


def test_mismatched_groups_are_refused():
    with pytest.raises(ValueError, match="3 trajectories but 2 group ids"):
        build_samples(EPISODES, GROUPS[:2], RewardConfig(), AlgorithmConfig())


def test_an_episode_with_a_tester_failure_is_left_out_whole():
    broken = _episode("d", (Outcome.PASSED, 2.0), (Outcome.HARNESS_ERROR, None))  # its first return is unknown
    samples, stats = build_samples(EPISODES[:2] + [broken], ["g", "g", "g"], RewardConfig(),
                                   AlgorithmConfig(advantage="rloo"))
    assert (stats.samples, stats.turns) == (4, 6) and stats.kinds["harness_error"] == 1


def test_pass_and_compile_rates_per_tier():
    _, stats = build_samples(EPISODES, GROUPS, RewardConfig(), AlgorithmConfig(), tiers=["easy", "medium", "easy"])
    # easy: episode a (passed, incorrect: both built); medium: episode b (compile error, passed)
    assert stats.by_tier == {"easy": {"turns": 2, "pass_rate": 0.5, "compile_rate": 1.0},
                             "medium": {"turns": 2, "pass_rate": 0.5, "compile_rate": 0.5}}
    with pytest.raises(ValueError, match="3 trajectories but 3 group ids and 2 tiers"):
        build_samples(EPISODES, GROUPS, RewardConfig(), AlgorithmConfig(), tiers=["easy", "easy"])
