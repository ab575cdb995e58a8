"""Start, find and use the tester pool (``actors.tester_pool.TesterPool``) from any Ray driver.

``start_pool`` connects to a cluster (``address``) or starts a local Ray, then creates the named
pool actor, or returns the one already running under that name. ``PoolClient.submit`` returns an
object ref at once; ``judge`` waits for many with a progress callback. Ray is imported here, late,
so that importing cudarl does not need it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from cudarl.config import CudarlConfig
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Verdict


class PoolError(RuntimeError):
    """No pool where one was expected, or a Ray cluster that cannot be reached."""


def connect_ray(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None,
                namespace: str = "cudarl") -> None:
    """Join the cluster at ``address`` ("auto": the one this machine belongs to), or start a local
    one with the given resources when ``address`` is None. Does nothing when already connected."""
    import ray

    if ray.is_initialized():
        return
    try:
        if address:
            ray.init(address=address, namespace=namespace, logging_level="WARNING")
        else:
            from cudarl._compat import local_ray_workers_on_this_python

            with local_ray_workers_on_this_python():
                ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, namespace=namespace,
                         include_dashboard=False, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise PoolError(f"cannot reach a Ray cluster at {address!r}: {exc}") from exc


class PoolClient:
    """A handle on a running pool. Cheap to create; every method talks to the pool actor."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name

    def submit(self, task: Task, candidate: Candidate):
        """An ``ObjectRef[Verdict]``, at once."""
        return self.handle.submit.remote(task, candidate)

    def submit_many(self, pairs: Iterable[tuple[Task, Candidate]]) -> list:
        """One ``ObjectRef[Verdict]`` per pair, in order, at once (the pool holds back work past
        ``pool.max_queued``; the refs then simply resolve later)."""
        return [self.handle.submit.remote(task, candidate) for task, candidate in pairs]

    def judge(self, pairs: list[tuple[Task, Candidate]], progress: Callable[[Verdict], None] | None = None,
              timeout_s: float | None = None) -> list[Verdict]:
        """Submit every pair and wait for all verdicts (in order), calling ``progress`` as each lands."""
        import ray

        refs = self.submit_many(pairs)
        position = {ref: index for index, ref in enumerate(refs)}
        verdicts: list[Verdict | None] = [None] * len(refs)
        pending = list(refs)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = ray.wait(pending, num_returns=1, timeout=left)
            if not done:
                raise TimeoutError(f"{len(pending)} verdict(s) still missing after {timeout_s} s")
            for ref in done:
                verdicts[position[ref]] = verdict = ray.get(ref)
                if progress:
                    progress(verdict)
        return [v for v in verdicts if v is not None]

    def stats(self) -> dict:
        import ray

        return ray.get(self.handle.stats.remote())

    def scale(self, compile: int | str | None = None, bench: int | str | None = None) -> dict:
        """Pin worker counts (``"auto"`` gives a kind back to autoscaling); returns the stats."""
        import ray

        return ray.get(self.handle.scale.remote(compile=compile, bench=bench))

    def shutdown(self) -> None:
        """Stop the pool and its workers."""
        import ray

        try:
            ray.get(self.handle.shutdown.remote(), timeout=60)
        finally:
            ray.kill(self.handle, no_restart=True)


def start_pool(config: CudarlConfig | None = None, address: str | None = None, num_cpus: int | None = None,
               num_gpus: int | None = None) -> PoolClient:
    """The pool named ``config.pool.name``: the running one, or a new one (detached when
    ``config.pool.detached``). Starts a local Ray when not connected and ``address`` is None."""
    import ray

    from actors.tester_pool import TesterPoolActor

    config = config or CudarlConfig()
    settings = config.pool
    connect_ray(address, num_cpus=num_cpus, num_gpus=num_gpus, namespace=settings.namespace)
    handle = TesterPoolActor.options(name=settings.name, namespace=settings.namespace, get_if_exists=True,
                                     lifetime="detached" if settings.detached else None).remote(
        config.model_dump(mode="json"))
    ray.get(handle.ping.remote())
    return PoolClient(handle, settings.name)


def find_pool(name: str = "cudarl-tester", namespace: str = "cudarl", address: str | None = "auto") -> PoolClient:
    """The running pool called ``name`` on the cluster at ``address``; ``PoolError`` if there is none."""
    import ray

    connect_ray(address, namespace=namespace)
    try:
        handle = ray.get_actor(name, namespace=namespace)
    except ValueError as exc:
        raise PoolError(f"no tester pool named {name!r} in namespace {namespace!r}; "
                        "start one with `cudarl tester serve`") from exc
    return PoolClient(handle, name)
