"""CompileWorker: the tester's guard and compile stages on a CPU (any node with nvcc).

One build at a time per worker; the pool runs as many workers as it has cores for. Builds land
in the node's compile cache (shared by every worker of the node, file-locked) and go back to the
pool as an artifact, so a bench worker on another node can run them.
"""

from __future__ import annotations

import ray

from actors import worker_identity
from cudarl.config import TesterConfig
from cudarl.tasks.task import Task
from cudarl.tester.candidate import Candidate
from cudarl.tester.stages import Compiled, compile_stage
from cudarl.tester.tester import Tester


class CompileWorker:
    """Runs ``compile_stage`` for the pool. ``config`` is a ``TesterConfig`` dump whose compile
    mode and arch the pool fixed to its bench workers' (so that builds load there)."""

    def __init__(self, config: dict) -> None:
        self.tester = Tester(TesterConfig.model_validate(config))

    def ready(self) -> dict:
        """Where this worker runs and what it builds for (answers once the tester is up)."""
        return {**worker_identity(), "mode": self.tester.mode, "arch": self.tester.arch}

    def compile(self, task: Task, candidate: Candidate) -> tuple[Compiled, bytes | None]:
        """The record and the artifact, returned as two objects (``num_returns=2``) so that the
        pool reads the small record and passes the artifact on by reference."""
        return compile_stage(self.tester, task, candidate)


CompileWorkerActor = ray.remote(num_cpus=1, max_restarts=0)(CompileWorker)
