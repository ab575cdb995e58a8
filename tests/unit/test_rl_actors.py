"""The RL loop's two thin actors as plain classes (the driver test runs them as actors on a real
local Ray): the curriculum controller draws, counts verdicts and round-trips its state like the
curriculum it wraps; the reward aggregator gives what ``build_samples`` gives."""

from __future__ import annotations

from actors.curriculum_controller import CurriculumController
from actors.reward_aggregator import RewardAggregator
from cudarl.config import CurriculumConfig
from cudarl.config_rl import AlgorithmConfig, RewardConfig
from cudarl.rl.samples import build_samples
from cudarl.tasks.curriculum import Curriculum
from cudarl.tester.verdict import Outcome
from tests.unit.test_curriculum import suite
from tests.unit.test_reward import _verdict
from tests.unit.test_rl_samples import EPISODES, GROUPS


def test_the_controller_matches_the_curriculum_and_resumes_exactly():
    config = CurriculumConfig(window=4)
    controller, plain = CurriculumController(suite(), config), Curriculum(suite(), config)
    assert controller.tiers() == ["easy", "medium", "hard"] and controller.tier() == "easy"
    drawn = controller.sample(3)
    assert [t.id for t in drawn] == [t.id for t in plain.sample(3)]
    verdicts = []
    for task in drawn:
        verdict = _verdict(Outcome.PASSED, 2.0)
        verdict.task_id = task.id
        verdicts.append(verdict)
    saved = controller.state_dict()
    assert controller.record_verdicts(verdicts) == "easy"
    after = [t.id for t in controller.sample(5)]
    controller.load_state_dict(saved)  # as a retried rollout puts it back
    controller.record_verdicts(verdicts)
    assert [t.id for t in controller.sample(5)] == after


def test_the_aggregator_gives_what_build_samples_gives():
    aggregator = RewardAggregator(RewardConfig(), AlgorithmConfig(advantage="grpo"))
    tiers = ["easy", "easy", "medium"]
    got = aggregator.aggregate(EPISODES, GROUPS, tiers, trainer_version=5)
    assert got == build_samples(EPISODES, GROUPS, RewardConfig(), AlgorithmConfig(advantage="grpo"),
                                trainer_version=5, tiers=tiers)
    assert got[1].by_tier["easy"]["turns"] == 4
