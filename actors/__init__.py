"""Ray actors: thin wrappers that give the library's classes (``cudarl``) a place in the cluster.

Each module defines a plain class (testable without a cluster) and applies ``ray.remote`` at
the bottom; the logic stays in ``cudarl``.
"""

from __future__ import annotations


def worker_identity() -> dict:
    """Where the calling actor runs: Ray node id, host name and process id (workers' ``ready()``)."""
    import os
    import socket

    import ray

    return {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(), "pid": os.getpid()}
