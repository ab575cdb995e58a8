"""One reference timing per task and GPU at a time, shared by every judge that needs it.

A GRPO group sends several candidates of one task at once, and a bench worker judges them side by
side. Timing the reference in each of their judges cost an exclusive GPU turn per candidate (about
1 s, plus the wait behind the others). Here the first judge of a task starts one measurement (a
reference-only judge, run by the tester) and every judge of that task asks for its result: those
in flight wait for the same measurement, later ones reuse it while it is younger than
``timing.reference_reuse_s``. The measurement runs beside the candidate's own judge, so its cost
is hidden behind the candidate's load and correctness trials.

What is not covered: a measurement is kept per tester (one per GPU and process), not shared
between bench workers, and a failed measurement is not retried for the judges already waiting on
it (each gets ``harness_error``; the next judge of the task starts a new one).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from cudarl.tester.verdict import TimingStats


class ReferenceTimingFailed(Exception):
    """The reference could not be timed; the message says why (never the candidate's fault)."""


@dataclass(frozen=True)
class ReferenceTiming:
    stats: TimingStats
    measured_at: float  # time.monotonic() when the measurement ended

    def age_s(self) -> float:
        return max(time.monotonic() - self.measured_at, 0.0)


class ReferenceTimings:
    """Reference timings by task key: measured once, shared while young. Thread-safe."""

    def __init__(self, reuse_s: float, workers: int = 2) -> None:
        self.reuse_s = reuse_s
        self._lock = threading.Lock()
        self._entries: dict[str, Future] = {}
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reference-timing")
        self.measured = 0  # measurements started (for stats and tests)

    def get(self, key: str, measure: Callable[[], TimingStats]) -> Future:
        """A future of the task's ``ReferenceTiming``: the one in flight, a young finished one, or
        a new measurement (``measure()`` on a worker thread; it raises ``ReferenceTimingFailed``)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self._usable(entry):
                return entry
            future = self._executor.submit(self._measure, measure)
            self._entries[key] = future
            self.measured += 1
            return future

    def _usable(self, future: Future) -> bool:
        if not future.done():
            return True  # in flight: wait for it rather than measuring twice
        if future.exception() is not None:
            return False
        return future.result().age_s() <= self.reuse_s

    @staticmethod
    def _measure(measure: Callable[[], TimingStats]) -> ReferenceTiming:
        stats = measure()
        return ReferenceTiming(stats, time.monotonic())
