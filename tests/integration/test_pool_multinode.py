"""GPU nodes joining a running tester pool add bench workers: a real multi-node Ray cluster on
this machine (``ray.cluster_utils.Cluster``: one raylet per node), no mocks.

The head node has CPUs only; nodes with ``num_gpus`` join while the pool runs. With
``max_bench_workers = 0`` the bench bound follows the cluster's GPUs (``scaling.bench_bounds``),
and ``min_bench_workers = 3`` makes the pool keep as many bench workers as that bound allows, so
each joining node shows up as workers without any call to ``scale``.

Covered: on the GPU-less cluster the pool runs ``bench_workers_without_gpu`` bench workers with no
GPU, on the head node; the first GPU node (1 GPU) lowers the bound to one per GPU, the GPU-less
workers give way (killed, not counted as restarts) and one bench worker with a whole GPU starts on
that node; its torch sees no CUDA, so its profile (kernel mode) is taken with a warning in stats
and the compile worker is replaced to build for it, after which ``scale(compile=2)`` works; a
second GPU node (2 GPUs, 1 CPU) raises the bound to 3 and two more workers start there (placed by
GPU alone), each pinned to one GPU of its node (``CUDA_VISIBLE_DEVICES``); a candidate submitted
afterwards is compiled on the head and loaded on a GPU node, one verdict.
Not covered: real GPUs (the GPUs are Ray resources only: torch on those nodes sees no CUDA, so
bench workers report ``has_gpu`` false, run the load stage only and the verdict is ``compiled``),
the build travelling as an artifact between machines
(the nodes share this machine's compile cache, so the bench worker finds the build installed),
nodes leaving (tests/integration/test_tester_pool.py kills workers, not nodes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest
import ray  # a dependency: a broken install must fail, not skip
from ray import cluster_utils

from cudarl.config import CudarlConfig
from cudarl.pool import PoolClient
from cudarl.pool.records import WorkerIdentity
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Outcome
from tests.fixtures.tiny import TASK, candidate

pytestmark = pytest.mark.slow

ADD = Task(id="add", source=TASK)
HEAD_CPUS = 3  # the compile worker and the two GPU-less bench workers, one CPU each
WITHOUT_GPU = 2  # pool.bench_workers_without_gpu
WAIT_S = 90.0


@pytest.fixture(scope="module")
def cluster(ray_cluster):
    """A head node without GPUs; the test adds GPU nodes to it (the session's Ray shut down first:
    a driver joins one cluster at a time)."""
    ray_cluster.release()
    nodes = cluster_utils.Cluster(initialize_head=True,
                                  head_node_args={"num_cpus": HEAD_CPUS, "num_gpus": 0, "include_dashboard": False})
    ray.init(address=nodes.address, namespace="cudarl", logging_level="WARNING")
    yield nodes
    ray.shutdown()
    nodes.shutdown()


def make_pool(name: str, tmp_path: Path) -> PoolClient:
    from cudarl.pool import start_pool

    config = CudarlConfig.model_validate({
        "tester": {"compile": {"cache_dir": str(tmp_path / name)}},
        "pool": {"name": name, "scale_interval_s": 0.25, "min_compile_workers": 1, "max_compile_workers": 1,
                 "min_bench_workers": 3, "max_bench_workers": 0, "gpus_per_bench_worker": 1.0,
                 "bench_workers_without_gpu": WITHOUT_GPU}})
    return start_pool(config)


def _brief(stats: dict) -> str:
    return json.dumps({"cluster": stats["cluster"], "workers": stats["workers"], "restarts": stats["restarts"],
                       "last_error": stats["last_error"]}, sort_keys=True)


def wait_for_stats(pool: PoolClient, condition: Callable[[dict], bool], what: str, timeout_s: float = WAIT_S) -> dict:
    """The first ``stats()`` that satisfies ``condition``; prints each change while waiting."""
    started = time.monotonic()
    shown = ""
    while True:
        stats = pool.stats()
        if condition(stats):
            print(f"[{time.monotonic() - started:5.1f} s] {what}: {_brief(stats)}")
            return stats
        if _brief(stats) != shown:
            shown = _brief(stats)
            print(f"[{time.monotonic() - started:5.1f} s] waiting for {what}: {shown}")
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last stats: {_brief(stats)}")
        time.sleep(0.25)


def settled(stats: dict, kind: str, ready: int, gpus: float) -> bool:
    """``ready`` workers of ``kind`` up, none starting, holding ``gpus`` GPUs together."""
    workers = stats["workers"][kind]
    return workers["ready"] == ready and workers["starting"] == 0 and workers["gpus"] == gpus


def worker_infos(pool: PoolClient, kind: str) -> list[dict]:
    """Each ready worker's ``ready()`` answer (a ``WorkerIdentity``: node id, pid; bench workers:
    has_gpu, CUDA_VISIBLE_DEVICES as ``gpus``) as a dict, with its actor id and handle."""
    handles = ray.get(pool.handle.worker_handles.remote(kind))
    infos = ray.get([handle.ready.remote() for handle in handles], timeout=60)
    assert all(isinstance(info, WorkerIdentity) for info in infos)
    return [{**asdict(info), "actor": handle._actor_id.hex(), "handle": handle} for handle, info in zip(handles, infos)]


def test_gpu_nodes_joining_add_bench_workers(cluster, tmp_path):
    head = cluster.head_node.node_id
    pool = make_pool("pool-nodes", tmp_path)

    # 1. No GPU in the cluster: bench_workers_without_gpu GPU-less workers, on the head.
    stats = wait_for_stats(pool, lambda s: settled(s, "bench", WITHOUT_GPU, 0.0) and settled(s, "compile", 1, 0.0),
                           "the GPU-less workers")
    assert stats["cluster"] == {"CPU": float(HEAD_CPUS), "GPU": 0.0}
    assert stats["workers"]["bench"]["bounds"] == [WITHOUT_GPU, WITHOUT_GPU]  # min(3, 2): as many as allowed
    assert stats["workers"]["bench"]["manual"] is False
    gpu_less = worker_infos(pool, "bench")
    assert [(w["node"], w["has_gpu"], w["mode"]) for w in gpu_less] == [(head, False, "kernel")] * WITHOUT_GPU
    compile_before = worker_infos(pool, "compile")
    assert [w["node"] for w in compile_before] == [head]

    # 2. A node with one GPU joins: the bound becomes one per GPU, the GPU-less workers give way
    # and one worker with the whole GPU starts on the new node.
    first = cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    stats = wait_for_stats(pool, lambda s: s["cluster"]["GPU"] == 1.0 and settled(s, "bench", 1, 1.0),
                           "one bench worker with the new node's GPU")
    assert stats["cluster"] == {"CPU": HEAD_CPUS + 1.0, "GPU": 1.0}
    assert stats["workers"]["bench"]["bounds"] == [1, 1]
    (pinned,) = worker_infos(pool, "bench")
    assert pinned["node"] == first.node_id
    assert pinned["gpus"] == "0"  # Ray pinned it to the node's only GPU
    assert pinned["has_gpu"] is False  # a Ray resource, not a device: torch sees no CUDA here
    assert pinned["actor"] not in {w["actor"] for w in gpu_less}
    for old in gpu_less:  # killed, not just forgotten
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(old["handle"].ready.remote(), timeout=30)
    assert stats["restarts"] == {} and stats["workers"]["bench"]["restarts"] == 0  # giving way is no restart
    # The GPU worker's torch sees no CUDA: its profile is taken anyway (else nothing would ever be
    # built), stats say why, and the compile worker built for the old profile is replaced.
    stats = wait_for_stats(pool, lambda s: s["compile_profile"] is not None and settled(s, "compile", 1, 0.0),
                           "the compile profile from the GPU worker")
    assert stats["compile_profile"] == {"mode": pinned["mode"], "arch": pinned["arch"]}
    assert "torch sees no CUDA" in stats["last_error"]
    assert [w["actor"] for w in worker_infos(pool, "compile")] != [w["actor"] for w in compile_before]
    # Compile workers scale again once the profile is known.
    stats = pool.scale(compile=2)
    stats = wait_for_stats(pool, lambda s: settled(s, "compile", 2, 0.0), "two compile workers")
    assert stats["workers"]["compile"]["bounds"] == [2, 2] and stats["workers"]["compile"]["manual"] is True
    pool.scale(compile="auto")

    # 3. A node with two GPUs and one CPU joins: the bound grows to 3 and two more workers start
    # there (bench workers are placed by their GPU alone, so one CPU does not limit them).
    second = cluster.add_node(num_cpus=1, num_gpus=2)
    cluster.wait_for_nodes()
    stats = wait_for_stats(pool, lambda s: s["cluster"]["GPU"] == 3.0 and settled(s, "bench", 3, 3.0),
                           "three bench workers, one per GPU")
    assert stats["cluster"] == {"CPU": HEAD_CPUS + 2.0, "GPU": 3.0}
    assert stats["workers"]["bench"]["bounds"] == [3, 3] and stats["workers"]["bench"]["manual"] is False
    bench = worker_infos(pool, "bench")
    assert pinned["actor"] in {w["actor"] for w in bench}  # the first GPU worker stayed
    placed = sorted((w["node"], w["gpus"]) for w in bench)
    assert placed == sorted([(first.node_id, "0"), (second.node_id, "0"), (second.node_id, "1")]), placed
    assert stats["restarts"] == {}

    # 4. A candidate submitted now: compiled on the head, loaded on a GPU node, one verdict.
    submitted = Candidate(task_id="add", id="after-join", source=candidate("VARIANT = 'nodes'"))
    verdict = ray.get(pool.submit(ADD, submitted), timeout=240)
    assert verdict.candidate_id == "after-join"
    assert verdict.outcome == Outcome.COMPILED, verdict.reasons
    stats = pool.stats()
    assert stats["counts"]["submitted"] == 1 and stats["verdicts"] == {"compiled": 1}
    assert stats["stage_seconds"]["compile"]["count"] == 1 and stats["stage_seconds"]["bench"]["count"] == 1
    assert stats["in_flight"] == 0 and stats["queued"] == {"compile": 0, "bench": 0}
    assert stats["restarts"] == {} and "torch sees no CUDA" in stats["last_error"]
    assert settled(stats, "bench", 3, 3.0)
    pool.shutdown()
