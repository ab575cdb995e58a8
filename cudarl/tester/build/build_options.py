"""Which build options a candidate may give ``load_inline``: an allowlist, checked on the values the
guard can read in the source and again on the values the call gets at run time.

Why an allowlist: a candidate's compiler flags run in the tester's build, and nvcc and the host
compiler take options that write files anywhere (``--keep-dir``, ``-MF``, ``-o``, ``-save-temps``),
read any file (``-I``, ``--pre-include``, ``-include``, ``@file``), load plugins (``-fplugin``,
``-B``, ``-ccbin``) or link whatever a path names (``-L``, ``-Wl,``). A denylist always misses one
of them; honest kernels need few options: optimization, fast math, the C++ standard, defines,
warnings, register limits, and cuBLAS-like libraries by name. Anything else is refused with the
option named, before anything is built.

Covered: ``extra_cuda_cflags`` (nvcc, with ``-Xptxas`` and ``-Xcompiler`` values checked too),
``extra_cflags`` (the host compiler), ``extra_ldflags`` (``-l`` with a bare library name) and
``extra_include_paths`` (refused: includes come from the toolchain and the candidate's sources).
Not covered: confining the compiler itself (the sandbox does that), NVRTC options (``cudarl.nvrtc``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_LEVEL = r"-O[0-3s]?"
_DEFINE = r"-[DU][A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?"
_WARNING = r"-w|-W(no-)?[a-z][a-z0-9-]*(=[0-9]+)?"
_STD = r"-std=(c|gnu)\+\+(11|14|17|20|23)"
HOST_FLAGS = re.compile(
    rf"({_LEVEL}|{_DEFINE}|{_WARNING}|{_STD}|-ffast-math|-fopenmp|-fPIC|-march=native|-mtune=native|"
    r"-fno-(strict-aliasing|math-errno|exceptions)|-funroll-loops|-g[0-3]?)")
"""Host compiler options (``extra_cflags``, ``-Xcompiler`` values)."""
PTXAS_FLAGS = re.compile(r"(-v|--verbose|-O[0-3]|--?maxrregcount=\d{1,3}|-dlcm=c[ag]|"
                         r"--warn-on-(spills|local-memory-usage)|--allow-expensive-optimizations=(true|false))")
"""ptxas options (``-Xptxas`` and ``--ptxas-options`` values)."""
NVCC_FLAGS = re.compile(
    rf"({_LEVEL}|{_DEFINE}|{_WARNING}|{_STD}|--?std=c\+\+(11|14|17|20)|--?use_fast_math|-lineinfo|--?lineinfo|"
    r"--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)|--?maxrregcount=\d{1,3}|--?expt-relaxed-constexpr|"
    r"--?expt-extended-lambda|--?extended-lambda|--?restrict|--?resource-usage|--?extra-device-vectorization|"
    r"--?default-stream=(per-thread|legacy)|-arch=(sm|compute)_\d{2,3}[af]?|--gpu-architecture=(sm|compute)_\d{2,3}[af]?|"
    r"-gencode=arch=compute_\d{2,3}[af]?,code=(sm|compute)_\d{2,3}[af]?|--?Werror=[a-z-]+|--?diag-suppress=[0-9,]+|"
    r"-Xcudafe=--diag_suppress=[A-Za-z0-9_,]+)")
"""nvcc options whole (a value after ``=``); ``-Xptxas``/``-Xcompiler`` are checked by their values."""
SPLIT_VALUE = {"-D": "-D{}", "-U": "-U{}", "-maxrregcount": "-maxrregcount={}", "--maxrregcount": "-maxrregcount={}",
               "-std": "-std={}", "--std": "-std={}", "-arch": "-arch={}", "--gpu-architecture": "-arch={}",
               "-gencode": "-gencode={}"}
"""nvcc options that may take their value as the next item, and the joined form checked."""
LIBRARY = re.compile(r"-l(cublas|cublasLt|cudnn|curand|cufft|cusparse|cusolver|cuda|cudart|nvrtc|nvToolsExt|"
                     r"nvJitLink|gomp|m)")
"""Libraries a candidate may link by name (``extra_ldflags``): CUDA's own and the C runtime's."""


TAG = "[build-option]"


def refused_build_options(arguments: Mapping[str, object]) -> list[str]:
    """Reasons to refuse the build options among ``load_inline``'s ``arguments`` (empty: allowed),
    each tagged ``[build-option]`` as the static rules tag theirs."""
    reasons = []
    cuda = _items(arguments.get("extra_cuda_cflags"))
    reasons += [f"nvcc option {flag!r} is not allowed{why}" for flag, why in refused_nvcc_flags(cuda)]
    reasons += [f"host compiler option {flag!r} is not allowed (extra_cflags)"
                for flag in _items(arguments.get("extra_cflags")) if not HOST_FLAGS.fullmatch(flag)]
    reasons += [f"linker option {flag!r} is not allowed (extra_ldflags: -l with one of CUDA's libraries by name)"
                for flag in _items(arguments.get("extra_ldflags")) if not LIBRARY.fullmatch(flag)]
    reasons += [f"include path {path!r} is not allowed (extra_include_paths: includes come from the toolchain)"
                for path in _items(arguments.get("extra_include_paths"))]
    return [f"{TAG} {reason}" for reason in reasons]


def refused_nvcc_flags(flags: Iterable[str]) -> list[tuple[str, str]]:
    """Each refused nvcc flag with a short reason suffix (``-Xptxas v`` as two items checks ``v``)."""
    refused: list[tuple[str, str]] = []
    items = list(flags)
    index = 0
    while index < len(items):
        flag = items[index]
        index += 1
        name, _, value = flag.partition("=")
        if name in ("-Xptxas", "--ptxas-options", "-Xcompiler", "--compiler-options") and not value:
            value = items[index] if index < len(items) else ""
            index += 1
            flag = f"{name}={value}"
        elif flag in SPLIT_VALUE and index < len(items):
            flag = SPLIT_VALUE[flag].format(items[index])
            index += 1
            name, _, value = flag.partition("=")
        if name in ("-Xptxas", "--ptxas-options"):
            refused += [(part, " (ptxas)") for part in value.split(",") if not PTXAS_FLAGS.fullmatch(part)]
        elif name in ("-Xcompiler", "--compiler-options"):
            refused += [(part, " (host compiler)") for part in value.split(",") if not HOST_FLAGS.fullmatch(part)]
        elif not NVCC_FLAGS.fullmatch(flag):
            refused.append((flag, ""))
    return refused


def _items(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(item) for item in value]
    return [str(value)]
