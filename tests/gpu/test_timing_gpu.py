"""Timing on a host whose every core is busy (as a pool's build workers keep it): an honest
kernel on the current stream is not taken for side-stream work, and real side-stream work
still is (and its time is charged). Covers ``cudarl.tester.judging.timing`` directly (no judge, no
sandbox); the judge's ``[side-stream]`` rule is covered by the exploit corpus (``c07_side_stream``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cudarl.config import TimingConfig

pytestmark = pytest.mark.gpu

RUNS = 400
SPIN_CYCLES = 1_000_000  # about 0.5 ms of GPU time, the length of the kernel first misjudged


@pytest.fixture
def busy_host():
    """Two spinning child processes per core, for the test's length."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        yield len(spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def _time(call):
    import torch

    from cudarl.tester.judging import timing

    config = TimingConfig(warmup_runs=5, warmup_s=0.2, min_runs=RUNS, max_runs=RUNS, target_rse=0.0, budget_s=120.0)
    return timing.time_callable(call, timing.l2_flush_buffer(torch.device("cuda")), config)


def test_an_honest_kernel_on_a_busy_host_is_not_taken_for_side_stream_work(busy_host):
    from cudarl import _compat

    stats = _time(lambda _k: _compat.gpu_busy_wait(SPIN_CYCLES))
    print(f"{busy_host} spinners: {stats.count} runs, median {stats.median_ms:.3f} ms, "
          f"{stats.off_stream_runs} charged device time, {stats.late_runs} late")
    assert stats.count == RUNS
    assert stats.late_runs <= max(2, 0.1 * stats.count)  # the judge's default rule


def test_side_stream_work_on_a_busy_host_is_still_seen(busy_host):
    import torch

    from cudarl import _compat

    side = torch.cuda.Stream()

    def call(_k):
        with torch.cuda.stream(side):
            _compat.gpu_busy_wait(SPIN_CYCLES)

    stats = _time(call)
    print(f"{busy_host} spinners: {stats.count} runs, median {stats.median_ms:.3f} ms, "
          f"{stats.off_stream_runs} charged device time, {stats.late_runs} late")
    assert stats.late_runs > 0.5 * stats.count
    assert stats.off_stream_runs > 0.5 * stats.count and stats.median_ms > 0.3  # the side stream's time is charged
