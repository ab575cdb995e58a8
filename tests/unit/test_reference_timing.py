"""The shared reference timings: judges of one task in flight together share one measurement,
later ones reuse it while young, and a failed measurement is not kept."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cudarl.tester.judging.reference_timing import ReferenceTimingFailed, ReferenceTimings
from cudarl.tester.verdict import TimingStats


class Counting:
    """A measurement that takes a while and counts how often it ran."""

    def __init__(self, seconds: float = 0.3, fail: bool = False) -> None:
        self.calls = 0
        self.seconds, self.fail = seconds, fail
        self._lock = threading.Lock()

    def __call__(self) -> TimingStats:
        with self._lock:
            self.calls += 1
            number = self.calls
        time.sleep(self.seconds)
        if self.fail:
            raise ReferenceTimingFailed("the reference crashed")
        return TimingStats(median_ms=float(number), mean_ms=1.0, stdev_ms=0.0, min_ms=1.0, count=20, rse=0.0)


def test_judges_in_flight_together_share_one_measurement():
    timings, measure = ReferenceTimings(reuse_s=600), Counting()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: timings.get("task", measure).result(), range(4)))
    assert measure.calls == 1 and timings.measured == 1
    assert len({id(r) for r in results}) == 1
    other = timings.get("other task", measure).result()
    assert measure.calls == 2 and other.stats.median_ms == 2.0


def test_a_young_measurement_is_reused_and_an_old_one_is_not():
    measure = Counting(seconds=0.0)
    keeping = ReferenceTimings(reuse_s=600)
    first = keeping.get("task", measure).result()
    time.sleep(0.05)
    again = keeping.get("task", measure).result()
    assert again is first and again.age_s() >= 0.05 and measure.calls == 1
    not_keeping = ReferenceTimings(reuse_s=0)
    not_keeping.get("task", measure).result()
    time.sleep(0.01)
    not_keeping.get("task", measure).result()
    assert measure.calls == 3


def test_a_failed_measurement_fails_its_waiters_and_is_measured_again_next_time():
    timings, measure = ReferenceTimings(reuse_s=600), Counting(fail=True)
    futures = [timings.get("task", measure) for _ in range(3)]
    for future in futures:
        with pytest.raises(ReferenceTimingFailed, match="crashed"):
            future.result()
    assert measure.calls == 1
    measure.fail = False
    assert timings.get("task", measure).result().stats.median_ms == 2.0
