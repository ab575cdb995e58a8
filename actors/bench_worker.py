"""BenchWorker: the tester's load, correctness and timing stages (``Tester.judge``), pinned to one
GPU (or a share).

Candidates run in the tester's sandboxed child processes, never in this actor, so a candidate
that poisons its CUDA context takes only its child down; ``health`` checks, in a fresh child,
that the GPU still works, and the pool replaces the worker when it does not. Several candidates
at a time (``pool.bench_slots``): their judges take turns on the GPU, so timed runs never share
it (``cudarl.tester.judging.gpu_turns``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import ray

from actors import worker_identity
from cudarl import env, nvml
from cudarl.config import TesterConfig
from cudarl.pool.records import WorkerIdentity
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.built import Built
from cudarl.tester.tester import Tester
from cudarl.tester.verdict import Verdict

_HEALTH_PROBE = ("import torch; x = torch.ones(1 << 20, device='cuda'); "
                 "assert float((x * 2).sum()) == 2 * (1 << 20); torch.cuda.synchronize()")


class BenchWorker:
    """Runs ``Tester.judge`` for the pool on the GPU Ray gave this actor."""

    def __init__(self, config: dict) -> None:
        self.tester = Tester(TesterConfig.model_validate(config))
        self.node = ray.get_runtime_context().get_node_id()
        self._gpu_metrics = None
        self.last_gpu_sample: list[dict] = []
        threading.Thread(target=self._sample_forever, name="nvml-sampler", daemon=True).start()

    def ready(self) -> WorkerIdentity:
        """What the pool needs to configure compile workers: this GPU's arch and compile mode."""
        return worker_identity(mode=self.tester.mode, arch=self.tester.arch, has_gpu=self.tester.has_gpu,
                               gpus=env.get(env.CUDA_VISIBLE_DEVICES) or "")

    def judge(self, task: Task, candidate: Candidate, built: Built, artifact: list) -> Verdict:
        """``artifact`` holds the artifact's object ref in a list, so that Ray does not fetch it
        before we know this node's cache lacks the build."""
        return self.tester.judge(task, candidate, built, lambda: ray.get(artifact[0]))

    def health(self, timeout_s: float = 120.0) -> tuple[bool, str]:
        """Whether a fresh process can still use this GPU (always true without one)."""
        if not self.tester.has_gpu:
            return True, "no GPU"
        try:
            done = subprocess.run([sys.executable, "-c", _HEALTH_PROBE], capture_output=True, text=True,
                                  timeout=timeout_s, env=env.child_environment())
        except subprocess.TimeoutExpired:
            return False, f"health probe hung for {timeout_s:.0f} s"
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return done.returncode == 0, tail or "ok"

    def sample_gpu(self) -> list[dict]:
        """NVML utilization of this worker's GPUs, also recorded as metrics ([] without NVML)."""
        visible = [int(v) for v in (env.get(env.CUDA_VISIBLE_DEVICES) or "").split(",") if v.strip().isdigit()]
        samples = nvml.sample(visible or None)
        if samples:
            if self._gpu_metrics is None:
                from cudarl.metrics import GpuMetrics

                self._gpu_metrics = GpuMetrics()
            for gpu in samples:
                tags = {"gpu": str(gpu.index), "node": self.node[:12]}
                self._gpu_metrics.utilization.set(gpu.utilization_percent, tags=tags)
                self._gpu_metrics.memory_used.set(gpu.memory_used_bytes, tags=tags)
        self.last_gpu_sample = [vars(gpu) for gpu in samples]
        return self.last_gpu_sample

    def _sample_forever(self, period_s: float = 5.0) -> None:
        """Samples while candidates run (a call from the pool would wait behind them); stops at
        once where NVML is missing."""
        while self.sample_gpu():
            time.sleep(period_s)


BenchWorkerActor = ray.remote(num_cpus=1, max_restarts=0)(BenchWorker)
