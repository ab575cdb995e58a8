"""NVRTC builds for the nvrtc candidate format: ``extern "C"`` CUDA source to a cubin, cached.

Why a module of its own: compiling needs only libnvrtc (no GPU, no CUDA torch), so a compile
worker on a CPU machine can build what a GPU worker loads; and the cubin cache is shared by every
process that points at the same folder (the tester's compile child builds, the runner only
reads). The cache key hashes the source, the kernel name, the architecture, the options and the
NVRTC version, so any of them changing misses and an identical build hits.

Concurrent builders of one key: a file lock makes the second wait for the first and then read
its cubin (no retries reach the caller); files are written to a temporary name and renamed.

Not covered: loading and launching (``cudarl.nvrtc``, needs a GPU); kernels with C++ templates
named by expression (the format asks for ``extern "C"`` names).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from cudarl import env
from cudarl.build_rules import refused_includes, refused_nvrtc_options
from cudarl.files import file_lock, write_bytes_atomic

DEFAULT_OPTIONS = ("--std=c++17", "--ptxas-options=-v")
"""Added before the candidate's own options: the C++ standard, and ptxas's resource report
(registers, shared memory, spills) in the log, as for the inline format."""

_library: ctypes.CDLL | None = None


class NvrtcUnavailable(RuntimeError):
    """No libnvrtc could be loaded on this machine."""


class NvrtcCompileError(RuntimeError):
    """NVRTC rejected the source; the message is NVRTC's own log."""

    def __init__(self, name: str, log: str) -> None:
        super().__init__(f"NVRTC could not compile kernel {name!r}:\n{log.strip()}")
        self.log = log


@dataclass(frozen=True)
class CubinBuild:
    """A compiled kernel: the cubin, NVRTC's log (warnings, ptxas resource lines), how long it
    took, and whether it came from the cache."""

    cubin: bytes
    log: str
    seconds: float
    cached: bool
    key: str


def _library_candidates() -> list[str]:
    found: list[str] = []
    home = env.get(env.CUDA_HOME)
    roots = [Path(home)] if home else []
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        found += sorted(str(p) for p in (root / "lib64").glob("libnvrtc.so*") if "builtins" not in p.name)
    try:
        import nvidia  # the nvidia-* wheels torch depends on

        for base in getattr(nvidia, "__path__", []):
            found += sorted(str(p) for p in Path(base).glob("*/lib/libnvrtc.so*") if "builtins" not in p.name)
    except ImportError:
        pass
    system = ctypes.util.find_library("nvrtc")
    if system:
        found.append(system)
    return found


def library() -> ctypes.CDLL:
    """libnvrtc, loaded once: the toolkit's, else the one in torch's CUDA wheels, else the system's."""
    global _library
    if _library is None:
        errors = []
        for path in _library_candidates():
            try:
                _library = ctypes.CDLL(path)
                break
            except OSError as exc:
                errors.append(f"{path}: {exc}")
        if _library is None:
            raise NvrtcUnavailable("libnvrtc was not found (install the CUDA toolkit or torch's CUDA wheels); "
                                   + "; ".join(errors))
    return _library


def version() -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def _include_options() -> list[str]:
    """CUDA headers (cuda_fp16.h, cuda_bf16.h) for NVRTC: the toolkit's include folder if there is one."""
    from cudarl import _compat

    root = _compat.cuda_home()
    return [f"--include-path={root / 'include'}"] if root is not None and (root / "include").is_dir() else []


def _check(status: int, what: str) -> None:
    if status != 0:
        text = ctypes.c_char_p(library().nvrtcGetErrorString(status)).value or b"unknown error"
        raise RuntimeError(f"NVRTC {what} failed: {text.decode()}")


def compile_cubin(source: str, name: str, arch: str, options: list[str]) -> tuple[bytes, str]:
    """Compile ``source`` for ``sm_<arch>``; (cubin, log). Raises NvrtcCompileError with the log
    (or with the reasons, for options or includes ``build_rules`` refuses: checked here, where they
    reach NVRTC, whatever built them)."""
    refused = refused_nvrtc_options(options) + refused_includes(source)
    if refused:
        raise NvrtcCompileError(name, "; ".join(refused))
    lib = library()
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    program = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), f"{name}.cu".encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        flags = [f"--gpu-architecture=sm_{arch}", *DEFAULT_OPTIONS, *_include_options(), *options]
        array = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
        status = lib.nvrtcCompileProgram(program, len(flags), array)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        buffer = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, buffer)
        log = buffer.value.decode(errors="replace")
        if status != 0:
            raise NvrtcCompileError(name, log)
        _check(lib.nvrtcGetCUBINSize(program, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return cubin.raw, log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def cache_key(source: str, name: str, arch: str, options: list[str]) -> str:
    blob = json.dumps([source, name, arch, list(DEFAULT_OPTIONS), list(options), version()])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _cached(cache_dir: Path, key: str, started: float) -> CubinBuild | None:
    cubin, log = cache_dir / f"{key}.cubin", cache_dir / f"{key}.log"
    if not cubin.exists():
        return None
    return CubinBuild(cubin.read_bytes(), log.read_text() if log.exists() else "",
                      time.perf_counter() - started, True, key)


def build(source: str, name: str, arch: str, options: list[str], cache_dir: Path | None) -> CubinBuild:
    """The cubin of ``name``: from ``cache_dir`` when built before, else compiled (and stored).
    A failed compile raises NvrtcCompileError and is not cached (the log is the verdict)."""
    started = time.perf_counter()
    key = cache_key(source, name, arch, options)
    if cache_dir is not None:
        hit = _cached(cache_dir, key, started)
        if hit is not None:
            return hit
        with file_lock(cache_dir / f"{key}.lock"):
            hit = _cached(cache_dir, key, started)  # another builder may have finished meanwhile
            if hit is not None:
                return hit
            cubin, log = compile_cubin(source, name, arch, options)
            write_bytes_atomic(cache_dir / f"{key}.log", log.encode())
            write_bytes_atomic(cache_dir / f"{key}.cubin", cubin)
    else:
        cubin, log = compile_cubin(source, name, arch, options)
    return CubinBuild(cubin, log, time.perf_counter() - started, False, key)


def configured_cache_dir() -> Path:
    """Where this process keeps cubins: the tester's build folder when it set one, else the
    user's compile cache."""
    value = env.get(env.CUDARL_NVRTC_DIR)
    return Path(value) if value else env.cache_dir() / "nvrtc"


def configured_arch() -> str | None:
    """The target architecture the tester or the user set (``CUDARL_CUDA_ARCH``), if any."""
    value = env.get(env.CUDARL_CUDA_ARCH)
    return value.removeprefix("sm_") if value else None


def main() -> None:
    """``python -m cudarl.nvrtc_build`` with a JSON job on stdin: the tester's compile stage for
    nvrtc candidates whose kernel sources are literal. A process of its own so that a compiler
    hang or blow-up can be killed; it imports neither torch nor the candidate (about 0.1 s)."""
    import sys

    job = json.loads(sys.stdin.read())
    cache_dir = Path(job["cache_dir"])
    kernels = []
    for item in job["builds"]:
        try:
            result = build(item["source"], item["name"], job["arch"], item["options"], cache_dir)
        except (NvrtcCompileError, NvrtcUnavailable, RuntimeError) as exc:
            log = exc.log if isinstance(exc, NvrtcCompileError) else str(exc)
            print(json.dumps({"ok": False, "name": item["name"], "log": log, "kernels": kernels}))
            return
        kernels.append({"name": item["name"], "log": result.log, "cached": result.cached,
                        "seconds": result.seconds})
    print(json.dumps({"ok": True, "kernels": kernels}))


if __name__ == "__main__":
    main()
