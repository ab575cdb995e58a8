"""What the tester pool keeps about items and workers: plain records, no Ray.

Kept apart from the actor (``actors/tester_pool.py``) so that the actor reads as the flow of an
item (queue, compile, bench, verdict) and these read as the state it moves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from cudarl.tasks.task import Task
from cudarl.tester.candidate import Candidate
from cudarl.tester.scaling import Bounds, KindLoad
from cudarl.tester.stages import Compiled
from cudarl.tester.verdict import Outcome, Stage, Verdict


@dataclass(eq=False)
class PoolItem:
    """One distinct (task, source) being judged; every identical submission awaits its future."""

    key: str
    task: Task
    candidate: Candidate
    future: asyncio.Future
    submitted: float
    compiled: Compiled | None = None
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
    info: dict | None = None
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
