"""What the tester pool keeps about items and workers, and its policies: plain records and pure
functions, no Ray.

Kept apart from the actor (``actors/tester_pool.py``) so that the actor reads as the flow of an
item (queue, compile, bench, verdict) and these read as the state it moves and the rules it
follows (which submissions share a judgement, how compile and bench workers are configured).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from cudarl.config import TesterConfig
from cudarl.pool.scaling import Bounds, KindLoad
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.built import Built
from cudarl.tester.verdict import Outcome, Stage, Verdict


@dataclass(frozen=True)
class WorkerIdentity:
    """What a worker's ``ready()`` answers: where it runs, and what it builds or runs."""

    node: str
    """The Ray node id."""
    host: str
    pid: int
    mode: str
    """The compile mode its tester uses (``extension``, ``kernel``)."""
    arch: str
    """The architecture it builds for (compile) or its GPU's (bench)."""
    has_gpu: bool = False
    """Bench workers: whether torch sees a CUDA GPU there."""
    gpus: str = ""
    """Bench workers: ``CUDA_VISIBLE_DEVICES`` as Ray set it."""

    @property
    def profile(self) -> CompileProfile:
        return CompileProfile(self.mode, self.arch)


@dataclass(frozen=True)
class CompileProfile:
    """How compile workers build so that the bench workers can load the builds."""

    mode: str
    arch: str


@dataclass(eq=False)
class PoolItem:
    """One distinct (task, source) being judged; every identical submission awaits its future."""

    key: str
    task: Task
    candidate: Candidate
    future: asyncio.Future
    submitted: float
    built: Built | None = None
    artifact: object = None  # ObjectRef of the build, owned here
    reruns: int = 0
    expiry: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class PoolWorker:
    """One worker actor as the pool sees it: its slots, the items they run, whether it is leaving."""

    kind: str
    number: int
    handle: object
    gpus: float = 0.0
    slots: int = 1  # items it runs at once (bench workers: pool.bench_slots)
    info: WorkerIdentity | None = None
    items: set = field(default_factory=set)
    idle_since: float = field(default_factory=time.monotonic)
    retiring: bool = False
    loops: list = field(default_factory=list)
    waiting: set = field(default_factory=set)  # slot tasks blocked in queue.get()

    @property
    def busy(self) -> bool:
        return bool(self.items)


def pool_verdict(item: PoolItem, outcome: Outcome, stage: Stage, reason: str) -> Verdict:
    """A verdict the pool itself gives (deadline, dead workers): the candidate never finished a stage."""
    return Verdict(task_id=item.task.id, candidate_id=item.candidate.id, candidate_hash=item.candidate.source_hash,
                   stage=stage, outcome=outcome, reasons=[reason])


def latency_summary(times: Iterable[float]) -> dict:
    """Count, p50, p95 and mean of recent stage times, for ``stats()``."""
    ordered = sorted(times)
    if not ordered:
        return {"count": 0}
    return {"count": len(ordered), "p50": round(ordered[len(ordered) // 2], 3),
            "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
            "mean": round(sum(ordered) / len(ordered), 3)}


def kind_load(members: list[PoolWorker], queued: int) -> KindLoad:
    """What one kind's workers are doing, for ``scaling.scale_target``."""
    now = time.monotonic()
    return KindLoad(len(members), sum(1 for w in members if w.busy), queued,
                    tuple(now - w.idle_since for w in members if not w.busy and w.info is not None))


def workers_summary(members: list[PoolWorker], bounds: Bounds, manual: bool, restarts: int) -> dict:
    """One kind's workers as ``stats()`` shows them."""
    return {"ready": sum(1 for w in members if w.info is not None),
            "starting": sum(1 for w in members if w.info is None),
            "busy": sum(1 for w in members if w.busy), "bounds": [bounds.low, bounds.high], "manual": manual,
            "gpus": sum(w.gpus for w in members), "restarts": restarts}


def judgement_key(task: Task, candidate: Candidate) -> str:
    """Identical candidates of one task share a verdict: the key hashes the whole task (a task
    whose reference or shapes changed is another task) and the candidate's source, not its id."""
    return hashlib.sha256(f"{task.model_dump_json()}\0{candidate.source_hash}".encode()).hexdigest()[:32]


def builder_config(config: TesterConfig, profile: CompileProfile | None) -> TesterConfig:
    """The tester settings of a compile worker: the bench workers' compile mode and architecture
    (``profile``, from a bench worker) replace auto-detection, which on a CPU-only node would pick
    kernel mode and the fallback arch, and builds would not load on the GPU."""
    if profile is None:
        return config
    return config.with_changes({"compile.mode": profile.mode, "compile.arch": profile.arch})


def bench_config(config: TesterConfig, slots: int, gpu_share: float) -> TesterConfig:
    """The tester settings of a bench worker with ``slots`` candidates at once on ``gpu_share`` of
    a GPU. Unless judges take whole turns (``timing.gpu_turns = "whole"``), the correctness
    trials of several candidates share the GPU, so each process's memory share is divided among
    them: a candidate that allocates all it may cannot starve a neighbour's honest one."""
    if config.timing.gpu_turns == "whole" or (slots == 1 and gpu_share >= 1.0):
        return config
    fraction = config.sandbox.gpu_memory_fraction * min(gpu_share, 1.0) / slots
    return config.with_changes({"sandbox.gpu_memory_fraction": fraction})
