"""CurriculumController: the run's curriculum (``cudarl.tasks.curriculum.Curriculum``) as an actor.

Why an actor: the driver draws each step's tasks and reports verdicts to it, and anything else in
the cluster (a dashboard, a second driver, an operator's shell) can ask for the tier, the gates'
figures and the promotion events without touching the run. Its state goes into the run's
checkpoints (``state_dict``) and comes back on resume.
"""

from __future__ import annotations

import ray

from cudarl.config import CurriculumConfig
from cudarl.tasks.curriculum import Curriculum
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Verdict


class CurriculumController:
    def __init__(self, tasks: list[Task], config: CurriculumConfig) -> None:
        self.curriculum = Curriculum(tasks, config)

    def tiers(self) -> list[str]:
        """The tiers that hold tasks, in order."""
        return list(self.curriculum.tiers)

    def tier(self) -> str:
        return self.curriculum.tier

    def sample(self, count: int) -> list[Task]:
        return self.curriculum.sample(count)

    def record_verdicts(self, verdicts: list[Verdict]) -> str:
        """Count each verdict in order; the tier afterwards."""
        for verdict in verdicts:
            self.curriculum.record_verdict(verdict)
        return self.curriculum.tier

    def events(self) -> list[str]:
        """Promotions and demotions so far, with the gates' figures at each."""
        return list(self.curriculum.events)

    def state_dict(self) -> dict:
        return self.curriculum.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.curriculum.load_state_dict(state)


CurriculumControllerActor = ray.remote(num_cpus=0)(CurriculumController)
