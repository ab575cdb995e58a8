"""Ray actors: thin wrappers that give the library's classes (``cudarl``) a place in the cluster.

Each module defines a plain class (testable without a cluster) and applies ``ray.remote`` at
the bottom; the logic stays in ``cudarl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudarl.pool.records import WorkerIdentity


def worker_identity(mode: str, arch: str, has_gpu: bool = False, gpus: str = "") -> WorkerIdentity:
    """Where the calling actor runs (Ray node id, host name, process id) and what it builds or
    runs: a worker's ``ready()`` answer."""
    import os
    import socket

    import ray

    from cudarl.pool.records import WorkerIdentity

    return WorkerIdentity(node=ray.get_runtime_context().get_node_id(), host=socket.gethostname(), pid=os.getpid(),
                          mode=mode, arch=arch, has_gpu=has_gpu, gpus=gpus)
