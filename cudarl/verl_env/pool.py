"""The tester pool from inside verl's workers: the named pool actor cudarl's own runs use, found
or started on demand in whatever Ray cluster the worker belongs to, and judged without blocking
the worker's event loop (verl runs every agent loop as a coroutine on one loop).

Covered: the settings (a cudarl TOML by path, ``CUDARL_VERL_CONFIG``, or the defaults), one pool
per process, a verdict awaited. Not covered: the pool itself (``actors/tester_pool.py``).
"""

from __future__ import annotations

from functools import lru_cache

from cudarl import env
from cudarl.config import CudarlConfig, load_config
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Verdict


@lru_cache(maxsize=8)
def settings(path: str | None = None) -> CudarlConfig:
    """cudarl's settings for the integration: ``path``, else ``CUDARL_VERL_CONFIG``, else the defaults."""
    return load_config(path or env.get(env.CUDARL_VERL_CONFIG))


_handles: dict[tuple[str, str, str], object] = {}  # by (namespace, name, Ray job): a new Ray, a new handle


async def pool_actor(config: CudarlConfig):
    """The pool actor named ``config.pool.name`` (created when the cluster has none yet; workers
    asking at once all get the same one: Ray's get-or-create by name is atomic)."""
    import ray

    from actors.tester_pool import TesterPoolActor

    if not ray.is_initialized():  # a script outside verl's workers: a local Ray
        from cudarl._compat import local_ray_workers_on_this_python

        with local_ray_workers_on_this_python():
            ray.init(namespace=config.pool.namespace, include_dashboard=False, logging_level="WARNING")
    key = (config.pool.namespace, config.pool.name, ray.get_runtime_context().get_job_id())
    if key not in _handles:
        handle = TesterPoolActor.options(
            name=config.pool.name, namespace=config.pool.namespace, get_if_exists=True,
            lifetime="detached" if config.pool.detached else None).remote(config.model_dump(mode="json"))
        await handle.ping.remote()
        _handles[key] = handle
    return _handles[key]


async def judge(config: CudarlConfig, task: Task, candidate: Candidate) -> Verdict:
    """``candidate``'s verdict from the pool, awaited."""
    handle = await pool_actor(config)
    return await handle.submit.remote(task, candidate)
