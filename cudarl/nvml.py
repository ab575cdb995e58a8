"""GPU utilization and memory through NVIDIA's maintained NVML binding (``nvidia-ml-py``, imported
as ``pynvml``).

Used by bench workers to sample what their GPU is doing for the metrics. Returns nothing where
NVML cannot start (no driver: CPU machines): callers treat that as "not available", never as zero.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str
    utilization_percent: float  # share of the last sample period a kernel was running
    memory_used_bytes: int
    memory_total_bytes: int


_started: bool | None = None  # None: not tried yet


def _start() -> bool:
    global _started
    if _started is None:
        try:
            import pynvml
        except ImportError:  # a dependency, but an environment assembled by hand may lack it: say so once
            import sys

            print("cudarl: nvidia-ml-py is not installed: no GPU utilization or memory metrics", file=sys.stderr)
            _started = False
            return False
        try:
            pynvml.nvmlInit()
            _started = True
        except pynvml.NVMLError:
            _started = False
    return _started


def sample(visible: list[int] | None = None) -> list[GpuSample]:
    """One sample per GPU (only ``visible`` physical indices when given); [] without NVML."""
    if not _start():
        return []
    import pynvml

    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError:
        return []
    samples = []
    for index in range(count):
        if visible is not None and index not in visible:
            continue
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            utilization = pynvml.nvmlDeviceGetUtilizationRates(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
        except pynvml.NVMLError:  # a GPU that does not answer: left out of this sample
            continue
        samples.append(GpuSample(index, uuid.decode(errors="replace") if isinstance(uuid, bytes) else str(uuid),
                                 float(utilization.gpu), int(memory.used), int(memory.total)))
    return samples


def compute_capability(index: int = 0) -> str | None:
    """GPU ``index``'s compute capability as ``"90"``; None where NVML cannot start (no driver:
    CPU machines) or there is no such GPU. Why here: asking torch costs a torch import (seconds
    of CPU) in every process that only wants to know whether a GPU is there."""
    if not _start():
        return None
    import pynvml

    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(index))
    except pynvml.NVMLError:
        return None
    return f"{major}{minor}"
