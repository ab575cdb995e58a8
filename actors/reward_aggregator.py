"""RewardAggregator: judged episodes to training samples (``cudarl.rl.samples.build_samples``:
per-turn rewards, discounted returns, group advantages, the step's statistics) as an actor.

Why an actor: trajectories reach it through the object store, so the step's reward bookkeeping
runs beside the driver rather than in it, and its settings (``[reward]``, ``[algorithm]``) are
fixed once for the run.
"""

from __future__ import annotations

import ray

from cudarl.agents.trajectory import Trajectory
from cudarl.config_rl import AlgorithmConfig, RewardConfig
from cudarl.rl.batch import TrainSample
from cudarl.rl.samples import StepStats, build_samples


class RewardAggregator:
    def __init__(self, reward: RewardConfig, algorithm: AlgorithmConfig) -> None:
        self.reward, self.algorithm = reward, algorithm

    def aggregate(self, trajectories: list[Trajectory], groups: list[str], tiers: list[str],
                  trainer_version: int | None) -> tuple[list[TrainSample], StepStats]:
        return build_samples(trajectories, groups, self.reward, self.algorithm, trainer_version=trainer_version,
                             tiers=tiers)


RewardAggregatorActor = ray.remote(num_cpus=0)(RewardAggregator)
