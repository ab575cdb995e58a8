"""CompileWorker: the tester's guard and compile stages (``Tester.build``) on a CPU (any node
with nvcc).

One build at a time per worker; the pool runs as many workers as it has cores for. Builds land
in the node's compile cache (shared by every worker of the node, file-locked) and go back to the
pool as an artifact, so a bench worker on another node can run them.
"""

from __future__ import annotations

import hashlib

import ray

from actors import worker_identity
from cudarl.config import TesterConfig
from cudarl.pool.records import WorkerIdentity
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.build.artifact import pack_artifact
from cudarl.tester.built import Built
from cudarl.tester.tester import Tester


class CompileWorker:
    """Runs ``Tester.build`` for the pool. ``config`` is a ``TesterConfig`` dump whose compile
    mode and arch the pool fixed to its bench workers' (so that builds load there)."""

    def __init__(self, config: dict) -> None:
        self.tester = Tester(TesterConfig.model_validate(config))

    def ready(self) -> WorkerIdentity:
        """Where this worker runs and what it builds for (answers once the tester is up)."""
        return worker_identity(mode=self.tester.mode, arch=self.tester.arch)

    def compile(self, task: Task, candidate: Candidate) -> tuple[Built, bytes | None]:
        """The record and the artifact, returned as two objects (``num_returns=2``) so that the
        pool reads the small record and passes the artifact on by reference."""
        built = self.tester.build(task, candidate)
        if not built.ready or built.cache_key is None:
            return built, None
        data = pack_artifact(self.tester.cache.entry(built.cache_key))
        return built.with_artifact(len(data), hashlib.sha256(data).hexdigest()), data


CompileWorkerActor = ray.remote(num_cpus=1, max_restarts=0)(CompileWorker)
