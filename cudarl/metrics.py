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


class TrainMetrics:
    """The RL run's per-step figures (recorded by the driver process of ``cudarl train``): the
    last step's values as gauges, so a dashboard plots them over time."""

    def __init__(self, run: str) -> None:
        from ray.util.metrics import Gauge

        def gauge(name: str, text: str, *keys: str) -> Gauge:
            metric = Gauge(name, text, tag_keys=("run", *keys))
            metric.set_default_tags({"run": run})
            return metric

        self.step = gauge("cudarl_train_step", "Steps finished.")
        self.reward = gauge("cudarl_train_reward", "Mean reward of the step's counted turns.")
        self.rate = gauge("cudarl_train_rate", "Share of the step's counted turns that passed (pass) or built "
                          "(compile), over all tiers (tier=all) and per curriculum tier.", "kind", "tier")
        self.speedup = gauge("cudarl_train_speedup", "Speedup of the step's correct turns (stat: mean, median).",
                             "stat")
        self.turns = gauge("cudarl_train_turns", "Mean turns per episode.")
        self.tokens = gauge("cudarl_train_response_tokens", "Response tokens trained on in the step.")
        self.seconds = gauge("cudarl_train_step_seconds", "Wall time of the step's phases (rollout: generation, "
                             "judge, update, sync, step: the whole step).", "phase")
        self.tier = gauge("cudarl_train_tier_level", "Curriculum tier the step sampled (0: the first).")
        self.version = gauge("cudarl_train_weights_version", "Weights version after the step's update.")
        self.version_lag = gauge("cudarl_train_version_lag", "Trainer version minus the oldest weights that "
                                 "generated a sample of the step (1 when rollout overlaps the update).")


class ServeMetrics:
    """The service's figures (recorded by the gateway): requests and their latency per agent
    version and answer status, verified kernels per version, and the A/B split's weights."""

    def __init__(self) -> None:
        from ray.util.metrics import Counter, Gauge, Histogram

        self.requests = Counter("cudarl_serve_requests", "Requests answered, by agent version (A/B arm; "
                                "'none' before one was chosen) and HTTP status.", tag_keys=("version", "status"))
        self.latency = Histogram("cudarl_serve_latency_seconds", "Wall time of /v1/optimize requests, by version.",
                                 boundaries=[0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600], tag_keys=("version",))
        self.verified = Counter("cudarl_serve_verified", "Answers holding a verified kernel, by version.",
                                tag_keys=("version",))
        self.weight = Gauge("cudarl_serve_ab_weight", "The A/B split's weight of each version (0: out or rolled back).",
                            tag_keys=("version",))
