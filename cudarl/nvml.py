"""GPU utilization from NVML through ctypes (no Python NVML package is required).

Used by bench workers to sample what their GPU is doing for the metrics. Returns nothing where
the driver's ``libnvidia-ml.so.1`` is missing (CPU machines): callers treat that as "not
available", never as zero.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str
    utilization_percent: float  # share of the last sample period a kernel was running
    memory_used_bytes: int
    memory_total_bytes: int


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


_library: ctypes.CDLL | None = None
_failed = False


def _nvml() -> ctypes.CDLL | None:
    global _library, _failed
    if _library is None and not _failed:
        try:
            library = ctypes.CDLL("libnvidia-ml.so.1")
            if library.nvmlInit_v2() != 0:
                raise OSError("nvmlInit failed")
            _library = library
        except (OSError, AttributeError):
            _failed = True
    return _library


def sample(visible: list[int] | None = None) -> list[GpuSample]:
    """One sample per GPU (only ``visible`` physical indices when given); [] without NVML."""
    library = _nvml()
    if library is None:
        return []
    count = ctypes.c_uint()
    if library.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        return []
    samples = []
    for index in range(count.value):
        if visible is not None and index not in visible:
            continue
        handle = ctypes.c_void_p()
        if library.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
            continue
        utilization, memory = _Utilization(), _Memory()
        uuid = ctypes.create_string_buffer(96)
        if (library.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(utilization)) != 0
                or library.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0):
            continue
        library.nvmlDeviceGetUUID(handle, uuid, 96)
        samples.append(GpuSample(index, uuid.value.decode(errors="replace"), float(utilization.gpu),
                                 int(memory.used), int(memory.total)))
    return samples
