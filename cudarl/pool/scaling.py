"""How many workers of one kind the pool should have: pure decisions, no Ray, unit-tested.

Up on queue depth (more items waiting per worker than ``per_worker_depth``: enough workers that
the queue drains at that depth), down on idleness (a worker idle for ``idle_s`` goes, never below
the minimum and never a busy one). Bench workers get their maximum from the cluster's GPUs, so a
GPU node that joins raises it at the next decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """Worker count limits of one kind; ``low <= high``."""

    low: int
    high: int

    def clamp(self, count: int) -> int:
        return max(self.low, min(self.high, count))


@dataclass(frozen=True)
class KindLoad:
    """What one kind of worker is doing right now."""

    workers: int  # alive or starting
    busy: int
    queued: int
    idle_seconds: tuple[float, ...] = ()  # one entry per idle worker


def scale_target(load: KindLoad, bounds: Bounds, per_worker_depth: int, idle_s: float) -> int:
    """The worker count to move to."""
    target = load.workers
    if load.queued > per_worker_depth * load.workers or (load.queued and not load.workers):
        target = max(target + 1, load.busy + math.ceil(load.queued / per_worker_depth))
    elif not load.queued:
        target -= sum(1 for seconds in load.idle_seconds if seconds >= idle_s)
    return bounds.clamp(target)


def pool_targets(bench: KindLoad, compile: KindLoad, bench_limits: Bounds, compile_limits: Bounds,
                 per_worker_depth: int, idle_s: float, waiting_for_profile: bool) -> tuple[int, int]:
    """(bench, compile) worker counts to move to. ``waiting_for_profile``: the cluster has GPUs
    but no bench worker has said what to build for yet; compile workers are then neither added
    nor removed (they would build for the wrong GPU), and a bench worker starts if builds wait."""
    bench_target = scale_target(bench, bench_limits, per_worker_depth, idle_s)
    if waiting_for_profile and compile.queued:
        bench_target = max(bench_target, 1)
    if waiting_for_profile:
        return bench_target, compile.workers
    return bench_target, scale_target(compile, compile_limits, per_worker_depth, idle_s)


def compile_bounds(low: int, high: int, cluster_cpus: float, bench_cpus: float, worker_cpus: float) -> Bounds:
    """Compile worker limits: ``high`` 0 means one per ``worker_cpus`` of the CPUs left after
    ``bench_cpus`` (what the pool keeps for bench workers and their judges)."""
    if high <= 0:
        high = max(1, int((cluster_cpus - bench_cpus) / worker_cpus + 1e-9))
    return Bounds(min(low, high), high)


def bench_bounds(low: int, high: int, cluster_gpus: float, gpus_per_worker: float, without_gpu: int) -> Bounds:
    """Bench worker limits: ``high`` 0 means one per ``gpus_per_worker`` of the cluster's GPUs, or
    ``without_gpu`` when the cluster has none."""
    if high <= 0:
        high = int(cluster_gpus / gpus_per_worker + 1e-9) if cluster_gpus > 0 else without_gpu
    return Bounds(min(low, high), high)
