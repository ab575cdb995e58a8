"""GPU samples through nvidia-ml-py: none without a driver (this machine, CI), sane figures for
every GPU with one (the GPU machine runs this file too)."""

from __future__ import annotations

import pynvml

from cudarl import nvml


def _has_nvml() -> bool:
    try:
        pynvml.nvmlInit()
        return True
    except pynvml.NVMLError:
        return False


def test_samples_are_empty_without_a_driver_and_sane_with_one():
    samples = nvml.sample()
    if not _has_nvml():
        assert samples == []
        return
    assert samples and len({s.uuid for s in samples}) == len(samples)
    for s in samples:
        assert 0 <= s.utilization_percent <= 100 and 0 < s.memory_used_bytes <= s.memory_total_bytes
    assert [s.index for s in nvml.sample(visible=[samples[0].index])] == [samples[0].index]
