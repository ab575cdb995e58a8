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


def test_whether_a_gpu_is_here_is_known_without_importing_torch():
    """The tester asks it in every pool worker and CLI run: a torch import there costs seconds of CPU."""
    import subprocess
    import sys

    probe = ("import sys\nfrom cudarl.tester.build.toolchain import gpu_arch\n"
             "print(gpu_arch(), 'torch' in sys.modules)")
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert answer.returncode == 0, answer.stderr[-2000:]
    arch, imported = answer.stdout.split()
    assert imported == "False"
    if _has_nvml():
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(0))
        assert arch == nvml.compute_capability() == f"{major}{minor}"
    else:
        assert arch == "None" and nvml.compute_capability() is None
