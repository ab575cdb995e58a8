"""The tester pool's books: what it owes callers and what it has counted. No Ray.

``ItemBook``: items in flight, verdicts already judged (an LRU of ``pool.verdict_cache_size``)
and the room for new items (``pool.max_queued``, backpressure); identical submissions share one
item or one judged verdict. ``PoolTally``: counts since the pool started, as ``stats()`` shows
them, each also recorded in the pool's Prometheus metrics once those exist (they need a running
actor), so the two never disagree.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict, deque
from collections.abc import Callable

from cudarl.pool.records import PoolItem, latency_summary
from cudarl.tester.verdict import Verdict


class ItemBook:
    """Which judgements are owed and which are done."""

    def __init__(self, max_queued: int, cache_size: int) -> None:
        self.inflight: dict[str, PoolItem] = {}
        self.judged: OrderedDict[str, Verdict] = OrderedDict()
        self.free = max_queued  # room for new items
        self.cache_size = cache_size
        self.waiting = 0  # submissions waiting for room
        self._wakeups: list[asyncio.Future] = []

    async def claim(self, key: str, start: Callable[[], PoolItem]) -> tuple[PoolItem | None, Verdict | None, bool]:
        """(item to await, None, started) for ``key``, or (None, judged verdict, False). ``start()``
        makes the item when neither exists, once there is room; ``started`` says this call made it.
        A claim waiting for room joins an identical item as soon as one starts (it needs no room of
        its own), so a duplicate never waits behind unrelated work."""
        while True:
            item = self.inflight.get(key)
            if item is not None:
                return item, None, False
            if key in self.judged:
                self.judged.move_to_end(key)
                return None, self.judged[key], False
            if self.free > 0:
                self.free -= 1
                item = self.inflight[key] = start()
                self._wake()
                return item, None, True
            wakeup = asyncio.get_running_loop().create_future()
            self._wakeups.append(wakeup)
            self.waiting += 1
            try:
                await wakeup
            finally:
                self.waiting -= 1

    def _wake(self) -> None:
        """Every waiting claim looks again (room freed, or an item started that one may join)."""
        wakeups, self._wakeups = self._wakeups, []
        for wakeup in wakeups:
            if not wakeup.done():
                wakeup.set_result(None)

    def close(self, item: PoolItem, verdict: Verdict, cacheable: bool) -> bool:
        """Resolve ``item`` with ``verdict`` exactly once (False when it already was), free its
        room and, if ``cacheable``, remember the verdict for identical submissions."""
        if item.future.done():
            return False
        item.future.set_result(verdict)
        item.artifact = None
        if item.expiry:
            item.expiry.cancel()
        if self.inflight.get(item.key) is item:
            del self.inflight[item.key]
        self.free += 1
        if cacheable and self.cache_size:
            self.judged[item.key] = verdict
            while len(self.judged) > self.cache_size:
                self.judged.popitem(last=False)
        self._wake()
        return True


class PoolTally:
    """Counts, verdicts by outcome, restarts and stage latencies, mirrored into ``TesterMetrics``."""

    def __init__(self, stages: tuple[str, ...]) -> None:
        self.counts: Counter = Counter()
        self.outcomes: Counter = Counter()
        self.restarts: Counter = Counter()  # (kind, reason) -> count
        self.stage_times: dict[str, deque] = {stage: deque(maxlen=2000) for stage in stages}
        self.metrics = None  # TesterMetrics, from start()

    def start(self, pool: str) -> None:
        from cudarl.metrics import TesterMetrics

        self.metrics = TesterMetrics(pool)

    def verdict(self, outcome: str) -> None:
        self.outcomes[outcome] += 1
        if self.metrics:
            self.metrics.verdicts.inc(tags={"outcome": outcome})

    def cache_lookup(self, cache: str, hit: bool) -> None:
        self.counts[f"{cache}_cache_{'hits' if hit else 'misses'}"] += 1
        if self.metrics:
            self.metrics.cache.inc(tags={"cache": cache, "result": "hit" if hit else "miss"})
            hits, misses = self.counts[f"{cache}_cache_hits"], self.counts[f"{cache}_cache_misses"]
            self.metrics.cache_hit_ratio.set(hits / (hits + misses), tags={"cache": cache})

    def restart(self, kind: str, reason: str) -> None:
        self.restarts[(kind, reason)] += 1
        if self.metrics:
            self.metrics.restarts.inc(tags={"kind": kind, "reason": reason})

    def stage(self, stage: str, seconds: float) -> None:
        """A stage's latency (``item``: a whole item's, from submission; in metrics only)."""
        if stage in self.stage_times:
            self.stage_times[stage].append(seconds)
        if self.metrics:
            self.metrics.stage_seconds.observe(seconds, tags={"stage": stage})

    def gauges(self, kind: str, queued: int, workers: int) -> None:
        if self.metrics:
            self.metrics.queue_depth.set(queued, tags={"stage": kind})
            self.metrics.workers.set(workers, tags={"kind": kind})

    def restarts_of(self, kind: str) -> int:
        return sum(n for (k, _), n in self.restarts.items() if k == kind)

    def summary(self) -> dict:
        """The tallies as ``stats()`` shows them."""
        return {"counts": dict(self.counts), "verdicts": dict(self.outcomes),
                "restarts": {f"{kind}/{reason}": n for (kind, reason), n in self.restarts.items()},
                "stage_seconds": {stage: latency_summary(times) for stage, times in self.stage_times.items()}}
