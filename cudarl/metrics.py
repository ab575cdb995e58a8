"""Every Prometheus metric cudarl exports, declared in one place.

Metrics go through ``ray.util.metrics``: each Ray node's metrics agent serves them on its
Prometheus endpoint (``ray start --metrics-export-port``), with the ``ray_`` prefix Ray adds
(``cudarl_tester_verdicts`` is scraped as ``ray_cudarl_tester_verdicts_total``). Objects are built
in the process that records them (the pool actor, the bench workers); building one needs a
connected Ray. Names and tags here are what the Grafana dashboards query.
"""

from __future__ import annotations

STAGE_SECONDS_BOUNDARIES = [0.01, 0.05, 0.25, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0]
"""Histogram buckets for stage latency: cache hits take milliseconds, cold inline builds minutes."""


class TesterMetrics:
    """The tester pool's metrics (recorded by the ``TesterPool`` actor)."""

    def __init__(self, pool: str) -> None:
        from ray.util.metrics import Counter, Gauge, Histogram

        tags = {"pool": pool}
        self.queue_depth = Gauge("cudarl_tester_queue_depth", "Items waiting for a worker, per stage (compile, bench).",
                                 tag_keys=("pool", "stage"))
        self.workers = Gauge("cudarl_tester_workers", "Workers alive or starting, per kind (compile, bench).",
                             tag_keys=("pool", "kind"))
        self.stage_seconds = Histogram("cudarl_tester_stage_seconds",
                                       "Wall time of a stage on its worker (compile, bench), "
                                       "and of a whole item (item).",
                                       boundaries=STAGE_SECONDS_BOUNDARIES, tag_keys=("pool", "stage"))
        self.verdicts = Counter("cudarl_tester_verdicts", "Verdicts returned to callers, by outcome.",
                                tag_keys=("pool", "outcome"))
        self.cache = Counter("cudarl_tester_cache_lookups",
                             "Cache lookups by cache (verdict: identical candidates; compile: builds) "
                             "and result (hit, miss).",
                             tag_keys=("pool", "cache", "result"))
        self.cache_hit_ratio = Gauge("cudarl_tester_cache_hit_ratio",
                                     "Hits over lookups since the pool started, per cache.",
                                     tag_keys=("pool", "cache"))
        self.restarts = Counter("cudarl_tester_worker_restarts",
                                "Workers replaced after dying, hanging past a deadline or failing a health check.",
                                tag_keys=("pool", "kind", "reason"))
        for metric in (self.queue_depth, self.workers, self.stage_seconds, self.verdicts, self.cache,
                       self.cache_hit_ratio, self.restarts):
            metric.set_default_tags(tags)


class GpuMetrics:
    """GPU utilization sampled with NVML by each bench worker (nothing is recorded without NVML)."""

    def __init__(self) -> None:
        from ray.util.metrics import Gauge

        self.utilization = Gauge("cudarl_gpu_utilization_percent",
                                 "Share of the last sample period in which a kernel ran on the GPU (NVML).",
                                 tag_keys=("gpu", "node"))
        self.memory_used = Gauge("cudarl_gpu_memory_used_bytes", "GPU memory in use (NVML).", tag_keys=("gpu", "node"))
