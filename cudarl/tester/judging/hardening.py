"""Runtime defenses used inside the runner (the candidate's process) and by the judge.

What each one is for:
- ``Originals``: the harness binds torch's timing and synchronization functions (and the host
  clocks) before the candidate is imported, calls only those, and afterwards names any that the
  candidate replaced (``[patched]``). Patching therefore cannot change a measurement.
- ``poison_free_memory``: fills every free block of the CUDA caching allocator with 0xFF bytes
  (NaN in every float format) before a checked call, so an output that is only partly written
  cannot inherit right values from earlier work (the freed-result trick).
- ``reset_persisting_l2``: clears persisting-L2 lines before each timed call, so an access policy
  window set by a kernel cannot survive the L2 flush.
- ``aliasing``: outputs must own their memory (not a view of an input, not shared between outputs).
- ``new_threads``: Python threads the candidate started and left running.
- ``profile_kernels`` and ``own_kernel_share``: which kernels a forward launched (through the
  profiler), and whether the candidate's own kernels did the work.
- ``drop_capabilities``: the runner gives up root's capabilities after CUDA is initialized; with
  the judge non-dumpable (``isolation.make_undumpable``), the runner cannot read or write the
  judge's memory or file descriptors through /proc.

Not covered: a candidate that writes into the runner's own memory below Python (blocked by the
static rules, not by these checks); GPU kernels that read another process's memory.
"""

from __future__ import annotations

import ctypes
import platform
import re
import sys
import threading
import time
from dataclasses import dataclass

import torch

from cudarl.tester.judging import correctness, knockout, timing
from cudarl.tester.kernel_names import kernel_base_name, qualified_kernel_name
from cudarl.tester.sandbox import channel

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAPSET_SYSCALL = {"x86_64": 126, "aarch64": 91}
_CUDA_LIMIT_PERSISTING_L2 = 0x06

WATCHED = (
    "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.synchronize", "torch.cuda.current_stream",
    "torch.Tensor.clone", "torch.Tensor.cpu", "torch.Tensor.fill_", "torch.Tensor.contiguous",
    "torch.randn", "torch.rand", "torch.randint", "torch.empty",
    "time.perf_counter", "time.monotonic", "time.time",
    # The harness's own functions that run in this process after the candidate is imported,
    # named through the imported modules (a moved module fails here, at import).
    *(f"{timing.__name__}.{name}" for name in ("time_callable", "summarize", "_sample", "l2_flush_buffer")),
    *(f"{correctness.__name__}.{name}" for name in ("check_plain_tensor", "inputs_unchanged")),
    f"{channel.__name__}.tensor_to_blob", "torch.equal", "torch.Tensor.view",
    *(f"{knockout.__name__}.{name}" for name in ("poison_", "same_bits", "same_outputs", "Knockout.skipped",
                                                 "Knockout.forward_depends")),
    *(f"{__name__}.{name}" for name in ("aliasing", "profile_kernels", "poison_free_memory", "new_threads")),
)


def _locate(path: str) -> tuple[str, list[str]]:
    """(module, attribute chain) of a dotted path: the longest importable prefix is the module."""
    import importlib

    parts = path.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        return ".".join(parts[:split]), parts[split:]
    raise AttributeError(path)


def _resolve(module: str, attributes: list[str]) -> object:
    value: object = sys.modules[module]
    for attribute in attributes:
        value = getattr(value, attribute)
    return value


class Originals:
    """Functions bound before the candidate runs; ``changed()`` names those later replaced.
    Paths are split into module and attributes once, so each check is a few lookups."""

    def __init__(self, paths: tuple[str, ...] = WATCHED) -> None:
        self.located = {path: _locate(path) for path in paths}
        self.bound = {path: _resolve(*where) for path, where in self.located.items()}
        self.code = {path: getattr(fn, "__code__", None) for path, fn in self.bound.items()}

    def changed(self) -> list[str]:
        replaced = []
        for path, original in self.bound.items():
            try:
                current = _resolve(*self.located[path])
            except (AttributeError, KeyError):
                replaced.append(path)
                continue
            if current is not original or getattr(current, "__code__", None) is not self.code[path]:
                replaced.append(path)
        return replaced


def poison_free_memory(device: torch.device) -> int:
    """Fill the caching allocator's free blocks with 0xFF; returns the bytes poisoned."""
    if device.type != "cuda":
        return 0
    sizes = sorted((block["size"] for segment in torch.cuda.memory_snapshot()
                    for block in segment.get("blocks", []) if block.get("state") == "inactive"),
                   reverse=True)
    held, poisoned = [], 0
    for size in sizes:
        try:
            block = torch.empty(size, dtype=torch.uint8, device=device)
        except torch.cuda.OutOfMemoryError:
            break
        block.fill_(0xFF)
        held.append(block)
        poisoned += size
    del held
    return poisoned


def _cudart() -> ctypes.CDLL | None:
    """The CUDA runtime library torch loaded (found in this process's memory map)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcudart.so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


class PersistingL2Reset:
    """Clears persisting-L2 lines and pins the persisting set-aside to zero, per timed call."""

    def __init__(self) -> None:
        self.library = _cudart()
        self.available = self.library is not None and hasattr(self.library, "cudaCtxResetPersistingL2Cache")

    def __call__(self) -> None:
        if self.available:
            self.library.cudaDeviceSetLimit(_CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(0))
            self.library.cudaCtxResetPersistingL2Cache()


def aliasing(outputs: list, inputs: list) -> str:
    """Empty when every output tensor owns its memory; else what it shares memory with."""
    def span(t: torch.Tensor) -> tuple[int, int]:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.data_ptr() + storage.nbytes()

    outs = [(i, o) for i, o in enumerate(outputs) if isinstance(o, torch.Tensor) and o.numel()]
    ins = [(i, x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.numel()]
    for i, out in outs:
        lo, hi = span(out)
        for j, value in ins:
            a, b = span(value)
            if lo < b and a < hi:
                return f"[alias] output {i} shares memory with input {j} (outputs must be new tensors)"
        for j, other in outs:
            a, b = span(other)
            if j > i and lo < b and a < hi:
                return f"[alias] outputs {i} and {j} share memory"
    return ""


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def new_threads(baseline: set[int]) -> list[str]:
    """Names of live Python threads that were not there at ``baseline``."""
    return sorted(t.name for t in threading.enumerate() if t.ident not in baseline and t.is_alive())


@dataclass
class KernelTime:
    name: str
    microseconds: float
    launches: int


def _kernel_profiler():
    """The profiler of the own-kernel check; ``warm_profiler`` starts one with the same settings."""
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])


def warm_profiler(device: torch.device) -> float:
    """Start CUDA and the profiler once, empty, before any request; returns the seconds it took.

    The first profiled call in a fresh process pays the profiler's start-up (CUPTI and Kineto):
    3.5 s on an H200, against 0.1 s once warmed (benchmarks/results/profiler_startup-*). The
    runner does it as soon as torch is imported, so the start-up overlaps the judge's own start
    and reference timing instead of adding to the evaluation; no candidate code exists yet."""
    started = time.perf_counter()
    torch.ones(1, device=device).add_(1)
    warm = _kernel_profiler()
    warm.prepare_trace()
    warm.start_trace()
    torch.cuda.synchronize(device)
    warm.stop_trace()
    return time.perf_counter() - started


def profile_kernels(call, device: torch.device) -> tuple[object, list[KernelTime] | None, str]:
    """Run ``call`` under the profiler: (its output, GPU kernels it ran, why none if unavailable)."""
    with _kernel_profiler() as prof:
        output = call()
        torch.cuda.synchronize(device)
    kernels: dict[str, KernelTime] = {}
    gpu_events = 0
    for event in prof.events():
        if getattr(event.device_type, "name", "") != "CUDA":
            continue
        gpu_events += 1
        if re.match(r"(Memcpy|Memset)", event.name):
            continue
        item = kernels.setdefault(event.name, KernelTime(event.name, 0.0, 0))
        item.microseconds += float(event.time_range.elapsed_us())
        item.launches += 1
    if not gpu_events:
        return output, None, "the profiler recorded no GPU activity (CUPTI unavailable?)"
    return output, sorted(kernels.values(), key=lambda k: -k.microseconds), ""


# Library kernels (ATen, cuBLAS/cuBLASLt, CUTLASS, cuDNN): never the candidate's, even when a base
# name collides with one of its kernels. Names only: a candidate's own kernel may be called
# flash_attn_kernel (one in the suite is).
_FOREIGN_NAMESPACES = ("at::", "c10::", "cutlass", "cublas", "cudnn", "nvjet", "sm90_xmma", "sm80_xmma",
                       "xmma_", "ampere_", "volta_", "turing_")


def is_own_kernel(name: str, own_names: set[str]) -> bool:
    """A profiled kernel is the candidate's when its name matches one the candidate defines: a
    namespaced kernel (``pytorch_flash::flash_fwd_kernel``) only by its qualified name."""
    lowered = name.removeprefix("void ").lower()
    if any(lowered.startswith(ns) for ns in _FOREIGN_NAMESPACES) or "::native::" in name:
        return False
    qualified = qualified_kernel_name(name)
    if "::" in qualified:
        return qualified in own_names
    return qualified in own_names or kernel_base_name(name) in own_names


def own_kernel_share(kernels: list[KernelTime],
                     own_names: set[str]) -> tuple[float, list[KernelTime], list[KernelTime]]:
    """(share of kernel time in the candidate's own kernels, own kernels, other kernels)."""
    own = [k for k in kernels if is_own_kernel(k.name, own_names)]
    other = [k for k in kernels if not is_own_kernel(k.name, own_names)]
    total = sum(k.microseconds for k in kernels)
    share = sum(k.microseconds for k in own) / total if total > 0 else 0.0
    return share, own, other


def judge_own_kernels(kernels: list[KernelTime], own_names: set[str], min_share: float,
                      depends: bool | None = None, dependency_note: str = "") -> tuple[float, list[dict], str | None]:
    """The profiled trial's verdict on who did forward's GPU work: (own time share, the kernels
    as reported in the verdict, the rejection reason or None). Whether forward's output depends
    on the candidate's own kernels (``knockout``: True / False / None when it could not be
    observed) decides; only when it is undecided does the time share (``min_share``) decide.
    Fusing an epilogue around a cuBLAS GEMM is honest at any share; a kernel whose output is
    thrown away is a decoy at any share."""
    share, own, other = own_kernel_share(kernels, own_names)
    listed = [{"name": k.name[:200], "microseconds": k.microseconds, "launches": k.launches, "own": k in own}
              for k in kernels[:20]]
    others = ", ".join(f"{k.name[:80]} ({k.microseconds:.0f} us)" for k in other[:3]) or "nothing"
    if not own:
        names = ", ".join(sorted(own_names)) or "none found"
        return share, listed, f"[no-own-kernel] none of the candidate's kernels ({names}) ran in forward; " \
                              f"the GPU ran: {others}"
    if depends is False:
        return share, listed, "[torch-work] forward's output does not depend on the candidate's kernels: with " \
                              f"everything they wrote replaced by poison it is unchanged ({dependency_note}); " \
                              f"they took {share:.0%} of its GPU time, the rest: {others}"
    if depends is None and share < min_share:
        undecided = f" ({dependency_note}, so the time share decides)" if dependency_note else ""
        return share, listed, f"[torch-work] only {share:.0%} of forward's GPU kernel time was in the " \
                              f"candidate's kernels{undecided}; the rest: {others}"
    return share, listed, None


def drop_capabilities() -> str:
    """Give up every capability (root included) and forbid regaining privileges."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    number = _CAPSET_SYSCALL.get(platform.machine())
    if number is None:
        return f"capabilities kept (no capset number for {platform.machine()})"
    for capability in range(64):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.syscall(number, header, data) != 0:
        return f"capabilities kept (capset failed: errno {ctypes.get_errno()})"
    return "capabilities dropped"
