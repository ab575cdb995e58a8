"""The nvrtc candidate format's launch helper: ``extern "C"`` kernels compiled at run time by NVRTC.

Why: NVRTC compiles a kernel in milliseconds where ``load_inline`` takes about a minute (it
compiles torch's headers). A candidate in this format writes its kernels as ``extern "C"
__global__`` source and launches them from ``ModelNew.forward``::

    from cudarl.nvrtc import kernel, i32

    add = kernel(SOURCE, "add")                      # compiled by NVRTC here (cached by content)
    add(grid=blocks, block=256, args=[a, b, out, i32(n)])

Argument rules (checked before anything reaches the driver, with errors that name the
argument): tensors go in as device pointers and must be on the current CUDA device and
contiguous; Python ints must fit in int32 unless wrapped (``i64``), floats are passed as float32
unless wrapped (``f64``); ``grid``/``block`` are an int or 1-3 positive ints, at most 1024 threads
per block; ``shared_mem`` is bytes of dynamic shared memory.

Compiling needs no GPU (``cudarl.nvrtc_build``; the target architecture comes from
``CUDARL_CUDA_ARCH`` or the current GPU), so the tester's compile stage builds the cubins and the
runner only loads them. Launching goes through the CUDA driver (``cuModuleLoadData``,
``cuLaunchKernel``) on torch's current stream; dynamic shared memory above 48 KB is opted into
per kernel. Create kernels at module level or in ``__init__``, never per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
_STATIC_SHARED_LIMIT = 48 * 1024
_ATTRIBUTE_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


_DRIVER = None


def _driver():
    """The CUDA driver library (ctypes); argument types set for the calls made here."""
    import ctypes

    global _DRIVER
    if _DRIVER is None:
        library = ctypes.CDLL("libcuda.so.1")
        library.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        library.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        library.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        library.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 6, ctypes.c_uint, ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        library.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _DRIVER = library
    return _DRIVER



def _driver_check(status: int, what: str) -> None:
    if status != 0:
        import ctypes

        name = ctypes.c_char_p()
        _driver().cuGetErrorName(status, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {(name.value or b'CUDA driver error').decode()} ({status})")


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
    _driver_check(_driver().cuLaunchKernel(function, *grid, *block, shared_mem, stream, pointers, None),
                  "cuLaunchKernel")


class Kernel:
    """An ``extern "C"`` kernel: compiled by NVRTC when created (or read from the cubin cache),
    loaded onto a GPU at its first launch there."""

    def __init__(self, source: str, name: str, options: Sequence[str] = ()) -> None:
        if f"{name}(" not in source.replace(" (", "(") or "__global__" not in source:
            raise KernelArgumentError(f"the source defines no __global__ function named {name!r}")
        from cudarl import nvrtc_build

        self.source, self.name, self.options = source, name, list(options)
        self.arch = nvrtc_build.configured_arch() or _current_arch()
        self.build = nvrtc_build.build(source, name, self.arch, self.options, nvrtc_build.configured_cache_dir())
        from cudarl import env

        if self.build.log.strip() and env.get(env.CUDARL_NVRTC_DIR):
            print(self.build.log, flush=True)  # in the tester: ptxas's resource lines for the compile report
        self._functions: dict[int, object] = {}
        self._shared_opt_in: dict[int, int] = {}

    def _function(self, device: int):
        import ctypes

        import torch

        if device not in self._functions:
            torch.empty(0, device=f"cuda:{device}")  # the runtime's context is current on this thread
            module, function = ctypes.c_void_p(), ctypes.c_void_p()
            _driver_check(_driver().cuModuleLoadData(ctypes.byref(module), self.build.cubin), "cuModuleLoadData")
            _driver_check(_driver().cuModuleGetFunction(ctypes.byref(function), module, self.name.encode()),
                          f"cuModuleGetFunction({self.name!r})")
            self._functions[device] = function
        return self._functions[device]

    def __call__(self, grid: int | Sequence[int], block: int | Sequence[int], args: Sequence[object],
                 shared_mem: int = 0) -> None:
        import torch

        grid3, block3 = launch_dims(grid, "grid"), launch_dims(block, "block")
        if not isinstance(shared_mem, int) or isinstance(shared_mem, bool) or shared_mem < 0:
            raise KernelArgumentError(f"shared_mem must be a non-negative number of bytes, got {shared_mem!r}")
        arguments = [normalize_argument(i, a) for i, a in enumerate(args)]
        device = torch.cuda.current_device()
        for index, value in enumerate(arguments):
            if isinstance(value, torch.Tensor) and value.device.index != device:
                raise KernelArgumentError(f"argument {index} is on {value.device}, the current device is cuda:{device}")
        function = self._function(device)
        if shared_mem > max(_STATIC_SHARED_LIMIT, self._shared_opt_in.get(device, 0)):
            _driver_check(_driver().cuFuncSetAttribute(function, _ATTRIBUTE_MAX_DYNAMIC_SHARED, shared_mem),
                          f"opting {self.name!r} into {shared_mem} bytes of dynamic shared memory")
            self._shared_opt_in[device] = shared_mem
        _launch(function, grid3, block3, arguments, shared_mem)


def _current_arch() -> str:
    import torch

    if not torch.cuda.is_available():
        raise KernelArgumentError("no target architecture: no GPU is visible and CUDARL_CUDA_ARCH is not set")
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}"


def kernel(source: str, name: str, options: Sequence[str] = ()) -> Kernel:
    """A kernel from ``extern "C"`` CUDA source, compiled by NVRTC now (cached by content);
    ``options`` are NVRTC options such as ``--use_fast_math``."""
    return Kernel(source, name, options)
