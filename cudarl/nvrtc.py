"""The nvrtc candidate format's launch helper: ``extern "C"`` kernels compiled at run time by NVRTC.

Why: NVRTC compiles a kernel in milliseconds where ``load_inline`` takes about a minute (it
compiles torch's headers). A candidate in this format writes its kernels as ``extern "C"
__global__`` source and launches them from ``ModelNew.forward``::

    from cudarl.nvrtc import kernel, i32

    add = kernel(SOURCE, "add")                      # compiled once, at first launch
    add(grid=blocks, block=256, args=[a, b, out, i32(n)])

Argument rules (checked before anything reaches the driver, with errors that name the
argument): tensors go in as device pointers and must be on the current CUDA device and
contiguous; Python ints must fit in int32 unless wrapped (``i64``), floats are passed as float32
unless wrapped (``f64``); ``grid``/``block`` are an int or 1-3 positive ints, at most 1024 threads
per block; ``shared_mem`` is bytes of dynamic shared memory.

Status: the helper and its argument checks exist and are tested on the CPU; compiling and
launching (``torch.cuda._compile_kernel``, then ``cuLaunchKernel``) have not run on a GPU yet;
dynamic shared memory above 48 KB is not opted into yet. The tester does not accept this format
yet (the compile-throughput issue).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

_MAX_THREADS_PER_BLOCK = 1024
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
_INT32 = (-(2**31), 2**31 - 1)


class KernelArgumentError(ValueError):
    """A launch whose grid, block, shared memory or arguments cannot be right."""


@dataclass(frozen=True)
class Scalar:
    """A scalar argument with an explicit C type."""

    value: int | float
    ctype: str  # "int32", "int64", "float32", "float64"


def i32(value: int) -> Scalar:
    return Scalar(int(value), "int32")


def i64(value: int) -> Scalar:
    return Scalar(int(value), "int64")


def f32(value: float) -> Scalar:
    return Scalar(float(value), "float32")


def f64(value: float) -> Scalar:
    return Scalar(float(value), "float64")


def launch_dims(value: int | Sequence[int], what: str) -> tuple[int, int, int]:
    """``256`` or ``(16, 16)`` -> a 3-tuple, checked against the CUDA limits."""
    try:
        dims = (value,) if isinstance(value, int) else tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise KernelArgumentError(f"{what} must be an int or 1-3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise KernelArgumentError(f"{what} must be an int or 1-3 ints, got {value!r}")
    dims = dims + (1,) * (3 - len(dims))
    limits = _MAX_GRID if what == "grid" else _MAX_BLOCK
    for axis, (size, limit) in enumerate(zip(dims, limits)):
        if not 1 <= size <= limit:
            raise KernelArgumentError(f"{what}[{axis}] = {size} is outside 1..{limit}")
    if what == "block" and dims[0] * dims[1] * dims[2] > _MAX_THREADS_PER_BLOCK:
        raise KernelArgumentError(f"block {dims} has {dims[0] * dims[1] * dims[2]} threads; at most "
                                  f"{_MAX_THREADS_PER_BLOCK}")
    return dims  # type: ignore[return-value]


def normalize_argument(index: int, value: object) -> object:
    """One kernel argument as the launcher takes it: a tensor, or a typed scalar."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.device.type != "cuda":
            raise KernelArgumentError(f"argument {index} is a tensor on {value.device}; kernels need CUDA tensors")
        if not value.is_contiguous():
            raise KernelArgumentError(f"argument {index} is not contiguous; call .contiguous() first "
                                      "(the kernel sees a raw pointer)")
        return value
    if isinstance(value, Scalar):
        return value
    if isinstance(value, bool):
        raise KernelArgumentError(f"argument {index} is a bool; pass i32(0 or 1)")
    if isinstance(value, int):
        if not _INT32[0] <= value <= _INT32[1]:
            raise KernelArgumentError(f"argument {index} = {value} does not fit in int32; wrap it in i64(...)")
        return Scalar(value, "int32")
    if isinstance(value, float):
        return Scalar(value, "float32")
    raise KernelArgumentError(f"argument {index} is a {type(value).__name__}; pass tensors, ints, floats or "
                              "i32/i64/f32/f64(...)")


_CTYPES = {"int32": "c_int32", "int64": "c_int64", "float32": "c_float", "float64": "c_double"}


def _launch(function, grid: tuple[int, int, int], block: tuple[int, int, int], arguments: list,
            shared_mem: int) -> None:
    """cuLaunchKernel on the current stream. Why not torch's launcher: it passes every Python
    float as a double, which a ``float`` parameter would misread."""
    import ctypes

    import torch

    holders = [ctypes.c_void_p(a.data_ptr()) if isinstance(a, torch.Tensor)
               else getattr(ctypes, _CTYPES[a.ctype])(a.value) for a in arguments]
    pointers = (ctypes.c_void_p * max(1, len(holders)))(
        *[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    library = torch.cuda._utils._get_gpu_runtime_library()
    status = library.cuLaunchKernel(function, *grid, *block, shared_mem, stream, pointers, None)
    if status != 0:
        raise RuntimeError(f"cuLaunchKernel failed with CUDA driver error {status}")


class Kernel:
    """An ``extern "C"`` kernel, compiled by NVRTC at its first launch."""

    def __init__(self, source: str, name: str, options: Sequence[str] = ()) -> None:
        if f"{name}(" not in source.replace(" (", "(") or "__global__" not in source:
            raise KernelArgumentError(f"the source defines no __global__ function named {name!r}")
        self.source, self.name, self.options = source, name, list(options)
        self._compiled = None

    def compile(self):
        if self._compiled is None:
            import torch

            self._compiled = torch.cuda._compile_kernel(self.source, self.name, nvcc_options=self.options or None)
        return self._compiled

    def __call__(self, grid: int | Sequence[int], block: int | Sequence[int], args: Sequence[object],
                 shared_mem: int = 0) -> None:
        grid3, block3 = launch_dims(grid, "grid"), launch_dims(block, "block")
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise KernelArgumentError(f"shared_mem must be a non-negative number of bytes, got {shared_mem!r}")
        arguments = [normalize_argument(i, a) for i, a in enumerate(args)]
        _launch(self.compile().func, grid3, block3, arguments, shared_mem)


def kernel(source: str, name: str, options: Sequence[str] = ()) -> Kernel:
    """A kernel from ``extern "C"`` CUDA source; compiled by NVRTC when first launched."""
    return Kernel(source, name, options)
