"""From judged episodes to training samples and the step's statistics: each turn's reward from its
verdict, returns over the episode's turns, advantages over the rollout groups, one
``TrainSample`` per counted turn with the engine's own token ids, log-probs and weights version.

Covered: that conversion and the statistics a step logs (reward, pass and compile rates, speedups,
turns, tokens, failure kinds, weights-version lag). Not covered: where episodes come from (the
driver) and the update (``update``).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cudarl.agents.trajectory import Trajectory
from cudarl.config_rl import AlgorithmConfig, RewardConfig
from cudarl.reward import TurnReward, discounted_returns, turn_reward
from cudarl.rl.advantages import compute_advantages
from cudarl.rl.batch import TrainSample


@dataclass(frozen=True)
class StepStats:
    """What one step's episodes earned, for logs and metrics."""

    episodes: int
    turns: int
    samples: int  # turns trained on (episodes with a harness error are left out whole)
    mean_reward: float  # over counted turns
    pass_rate: float  # correct turns / counted turns
    compile_rate: float  # turns whose candidate built / counted turns
    mean_speedup: float | None  # over correct, timed turns
    median_speedup: float | None
    best_speedups: tuple[float | None, ...]  # per episode
    mean_turns: float
    response_tokens: int
    kinds: dict[str, int] = field(default_factory=dict)  # turns per reward kind
    alone: int = 0  # samples without a peer in their advantage group (advantage 0)
    version_lag: int = 0  # trainer's version minus the oldest weights that generated a sample
    by_tier: dict[str, dict[str, float]] = field(default_factory=dict)  # tier -> turns, pass_rate, compile_rate


def build_samples(trajectories: Sequence[Trajectory], groups: Sequence[str], reward: RewardConfig,
                  algorithm: AlgorithmConfig, trainer_version: int | None = None,
                  tiers: Sequence[str] | None = None) -> tuple[list[TrainSample], StepStats]:
    """``groups[i]``: the rollout group of ``trajectories[i]`` (the episodes of one task in one step);
    ``tiers[i]``: its task's curriculum tier (pass and compile rates are then also given per tier)."""
    if len(groups) != len(trajectories) or (tiers is not None and len(tiers) != len(trajectories)):
        raise ValueError(f"{len(trajectories)} trajectories but {len(groups)} group ids"
                         + (f" and {len(tiers)} tiers" if tiers is not None else ""))
    rows: list[tuple[Trajectory, int, TurnReward, float, str]] = []
    tier_of = {id(t): tier for t, tier in zip(trajectories, tiers)} if tiers is not None else {}
    for trajectory, group in zip(trajectories, groups):
        rewards = [turn_reward(turn.verdict, reward) for turn in trajectory.turns]
        if not all(r.counted for r in rewards):  # a tester failure leaves the episode's returns unknown
            rewards = [TurnReward(r.value, r.kind, r.terms, counted=False) for r in rewards]
        returns = discounted_returns([r.value for r in rewards], algorithm.gamma)
        rows += [(trajectory, index, r, g, group) for index, (r, g) in enumerate(zip(rewards, returns))]
    counted = [row for row in rows if row[2].counted]
    advantages = compute_advantages([row[3] for row in counted], [row[4] for row in counted],
                                    [row[1] for row in counted], algorithm.advantage)
    samples = []
    for (trajectory, index, _, _, _), advantage in zip(counted, advantages.values):
        turn = trajectory.turns[index]
        samples.append(TrainSample(token_ids=tuple(turn.prompt_ids) + tuple(turn.response_ids),
                                   prompt_length=len(turn.prompt_ids), old_logprobs=tuple(turn.logprobs),
                                   advantage=advantage, weights_version=turn.weights_version, adapter=turn.adapter))
    return samples, _stats(trajectories, rows, counted, advantages.alone, samples, trainer_version, tier_of)


def _built(row) -> bool:
    """Whether a counted turn's candidate built (a rejection after the build counts as built)."""
    trajectory, index, reward = row[0], row[1], row[2]
    return reward.kind not in ("format_error", "compile_failure", "rejected") or (
        reward.kind == "rejected" and trajectory.turns[index].verdict.compile is not None)


def _by_tier(counted, tier_of: dict[int, str]) -> dict[str, dict[str, float]]:
    rows_of: dict[str, list] = {}
    for row in counted:
        rows_of.setdefault(tier_of[id(row[0])], []).append(row)
    return {tier: {"turns": len(rows), "pass_rate": sum(r[2].kind == "correct" for r in rows) / len(rows),
                   "compile_rate": sum(_built(r) for r in rows) / len(rows)} for tier, rows in sorted(rows_of.items())}


def _stats(trajectories, rows, counted, alone: int, samples: list[TrainSample],
           trainer_version: int | None, tier_of: dict[int, str]) -> StepStats:
    speedups = [trajectory.turns[index].speedup for trajectory, index, reward, _, _ in counted
                if reward.kind == "correct" and trajectory.turns[index].speedup is not None]
    built = sum(1 for row in counted if _built(row))
    versions = [s.weights_version for s in samples]
    return StepStats(
        episodes=len(trajectories), turns=len(rows), samples=len(samples),
        mean_reward=statistics.fmean(row[2].value for row in counted) if counted else 0.0,
        pass_rate=sum(row[2].kind == "correct" for row in counted) / len(counted) if counted else 0.0,
        compile_rate=built / len(counted) if counted else 0.0,
        mean_speedup=statistics.fmean(speedups) if speedups else None,
        median_speedup=statistics.median(speedups) if speedups else None,
        best_speedups=tuple(t.best_speedup for t in trajectories),
        mean_turns=statistics.fmean(len(t.turns) for t in trajectories) if trajectories else 0.0,
        response_tokens=sum(len(s.old_logprobs) for s in samples),
        kinds=dict(Counter(row[2].kind for row in rows)), alone=alone,
        version_lag=(trainer_version - min(versions)) if trainer_version is not None and versions else 0,
        by_tier=_by_tier(counted, tier_of) if tier_of else {})
