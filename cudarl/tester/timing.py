"""Timing a model on the GPU the way a candidate cannot game.

Per timed call: flush L2 (write a buffer twice the L2 size), synchronize, record the start
event, call, synchronize the whole device (so work the candidate put on other streams counts),
record the end event. Warm-up runs come first (by count and by time, so clocks ramp up); runs repeat until the relative standard error of
the mean is under the target or the time budget is spent. The reference is timed the same way
in the same process, so the speedup is a ratio of two live measurements.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from cudarl.config import TimingConfig
from cudarl.tester.verdict import TimingStats

_FALLBACK_L2_BYTES = 64 << 20


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """A byte buffer at least twice the device's L2 cache."""
    properties = torch.cuda.get_device_properties(device)
    l2 = int(getattr(properties, "L2_cache_size", 0) or _FALLBACK_L2_BYTES)
    return torch.empty(2 * l2, dtype=torch.uint8, device=device)


def summarize(samples_ms: list[float]) -> TimingStats:
    """Median, mean, spread and relative standard error of a list of timings."""
    count = len(samples_ms)
    mean = statistics.fmean(samples_ms)
    stdev = statistics.stdev(samples_ms) if count > 1 else 0.0
    rse = (stdev / math.sqrt(count)) / mean if count > 1 and mean > 0 else float("inf")
    return TimingStats(median_ms=statistics.median(samples_ms), mean_ms=mean, stdev_ms=stdev,
                       min_ms=min(samples_ms), count=count, rse=rse)


def time_callable(call: Callable[[], object], flush: torch.Tensor, config: TimingConfig,
                  on_output: Callable[[object], None] | None = None) -> TimingStats:
    """Time ``call`` (which runs the model on fixed inputs); ``on_output`` sees the last output."""
    device = flush.device
    output = None
    warm_until = time.monotonic() + config.warmup_s
    runs = 0
    while runs < config.warmup_runs or time.monotonic() < warm_until:
        output = call()
        runs += 1
        if runs % 8 == 0:
            torch.cuda.synchronize(device)  # keep the host from queueing far ahead of the GPU
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples: list[float] = []
    deadline = time.monotonic() + config.budget_s
    while len(samples) < config.max_runs:
        flush.fill_(len(samples) & 0xFF)
        torch.cuda.synchronize(device)
        start.record()
        output = call()
        torch.cuda.synchronize(device)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
        if len(samples) >= config.min_runs:
            stats = summarize(samples)
            if stats.rse < config.target_rse or time.monotonic() > deadline:
                break
    if on_output is not None:
        on_output(output)
    return summarize(samples)
