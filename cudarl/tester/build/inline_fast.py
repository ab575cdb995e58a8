"""Faster builds of inline (``load_inline``) candidates, with the real compiler's output.

Where a stock ``load_inline`` build spends its time: two translation units, each parsing all of
torch's headers. ``main.cpp`` (the Python bindings) includes ``torch/extension.h``, which is
torch's C++ frontend plus pybind11; ``cuda.cu`` includes whatever the candidate wrote, nearly
always ``torch/extension.h`` too, parsed by nvcc's front end, then by the host compiler.

Two measures, each safe by construction:

- **A lighter torch header** (``.cu`` only): nvcc has no precompiled headers and reads the
  CUDA file's headers three times (its front end, the device compiler, the host compiler), so
  what the file includes sets the build time. ``#include <torch/extension.h>`` (or
  ``<torch/types.h>``) becomes ``#include "cudarl_torch.h"``, a header written into the build
  folder with only what the source uses (``light_header``): the tensor class, the operators it
  names, the ``torch`` namespace aliases copied from the installed ``torch/types.h``. Not when
  the source uses the C++ frontend or the Python bindings (``py::``, ``pybind11``,
  ``torch::nn``/``optim``/``jit``/``autograd``/``data``). One include line becomes one, so
  the compiler's line numbers are the candidate's. If the lighter build fails, the source as
  written is built and *its* errors are what the verdict shows (a broken candidate pays for
  both builds); the choice is remembered in the build folder so a later process (the runner)
  does not rebuild. The one difference a working source can see: ``torch::empty`` and the
  other factories are ATen's (``at::empty``), not the autograd-aware wrappers of the C++
  frontend, so factories asked for ``requires_grad=True`` raise.
- **Precompiled header** (``main.cpp`` only, GCC): ``torch/extension.h`` is precompiled once per
  flag set into ``<cache>/pch/<signature>/torch/extension.h.gch``, and that folder is put on the
  include path ahead of torch's. GCC uses the ``.gch`` only when it was built with compatible
  flags and silently falls back to the header otherwise, so a stale or foreign PCH costs speed,
  never correctness. The PCH is built once per machine by the tester itself (trusted code, never
  from a candidate's build files): a probe extension is built with the same hook and flags,
  and its ``build.ninja`` gives the exact compile line; a file lock serialises builders.
  Candidates that pass their own ``extra_cflags`` do not use it.

Elsewhere, same goal: nvcc's two front ends side by side (``cudarl.tester.build.nvcc_split``), compile
children that import torch before their job (``sandbox.WarmChildren``), build folders loadable
without ninja (``loading.load_artifact``).

Not covered: a precompiled header for the ``.cu`` (nvcc has none for host code); clang as the
host compiler (no ``.gch``); candidates whose own ``extra_cflags`` differ get their own PCH; a
lighter header for the bindings file (its PCH of all of ``torch/extension.h`` is 0.8 GB, and
loading it is most of that file's build; the CUDA file is the longer one today).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from cudarl.files import file_lock

_TORCH_HEADER = re.compile(r"#\s*include\s*[<\"]torch/(?:extension|types)\.h[>\"]")
_NEEDS_FULL = re.compile(r"\bpy::|pybind11|PYBIND11|torch::(nn|optim|jit|autograd|data|serialize|python)\b|"
                         r"THPVariable|#\s*include\s*[<\"]torch/(?!extension\.h|types\.h)")
_QUALIFIED_NAME = re.compile(r"\b(?:torch|at)::([A-Za-z_]\w*)")
_TORCH_NAMESPACE = re.compile(r"^namespace torch \{\n(.*?)^\} // namespace torch", re.MULTILINE | re.DOTALL)
LIGHT_HEADER = "cudarl_torch.h"
# What load_inline puts before the CUDA sources unless ``no_implicit_headers`` (one list item
# per line, as torch inserts them, so line numbers match a stock build's).
IMPLICIT_CUDA_HEADERS = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
IMPLICIT_CPP_HEADER = "#include <torch/extension.h>"
UNTRIMMED_MARKER = ".cudarl-untrimmed"


def _torch_include_dirs() -> list[Path]:
    from cudarl import _compat

    return [Path(p) for p in _compat.import_cpp_extension().include_paths()]


def find_torch_header(relative: str, include_dirs: list[Path] | None = None) -> Path | None:
    """Where ``relative`` (e.g. ``torch/types.h``) is on torch's include path, or None."""
    dirs = _torch_include_dirs() if include_dirs is None else include_dirs
    return next((d / relative for d in dirs if (d / relative).is_file()), None)


def light_header(cuda_sources: list[str], include_dirs: list[Path] | None = None) -> str | None:
    """The part of ``torch/extension.h`` these CUDA sources use, as a header's text; None when
    the sources need more (or torch's layout is not the expected one).

    What it holds: ``ATen/core/Tensor.h`` (the tensor class with every method, ``TORCH_CHECK``,
    scalar types), ``ATen/Dispatch.h`` when an ``AT_DISPATCH`` macro appears, one
    ``ATen/ops/<name>.h`` per ``torch::<name>``/``at::<name>`` that names an operator
    (``torch::empty`` -> ``ATen/ops/empty.h``), and the ``torch`` namespace block of the installed
    ``torch/types.h`` itself (``using namespace at``, ``torch::kFloat32``...), copied so that it
    always matches the installed torch."""
    text = "\n".join(cuda_sources)
    if not _TORCH_HEADER.search(text) or _NEEDS_FULL.search(text):
        return None
    dirs = _torch_include_dirs() if include_dirs is None else include_dirs

    def find(relative: str) -> Path | None:
        return find_torch_header(relative, dirs)

    types_header = find("torch/types.h")
    block = _TORCH_NAMESPACE.search(types_header.read_text()) if types_header else None
    if block is None or find("ATen/core/Tensor.h") is None:
        return None
    includes = ["ATen/core/Tensor.h"]
    if "AT_DISPATCH" in text:
        includes.append("ATen/Dispatch.h")
    for name in sorted(set(_QUALIFIED_NAME.findall(text))):
        if find(f"ATen/ops/{name}.h") is not None:
            includes.append(f"ATen/ops/{name}.h")
    lines = ["// Written by cudarl: the part of <torch/extension.h> that the CUDA source uses.",
             "#pragma once", *(f"#include <{h}>" for h in includes), "#include <optional>",
             "namespace torch {", block.group(1).rstrip(), "} // namespace torch", ""]
    return "\n".join(lines)


def trimmed_sources(cuda_sources: list[str]) -> list[str]:
    """The CUDA sources with their torch include pointing at ``LIGHT_HEADER`` (one line for
    one, so the compiler's line numbers stay the candidate's)."""
    return [_TORCH_HEADER.sub(f'#include "{LIGHT_HEADER}"', source) for source in cuda_sources]


def pch_signature() -> str:
    """What a main.cpp's compile line depends on besides the extension's name and paths (for
    candidates without their own ``extra_cflags``, the only ones that use the PCH)."""
    import torch

    blob = json.dumps([torch.__version__, sys.version, sys.executable])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def pch_dir_for(pch_root: Path) -> Path:
    """This torch's and Python's PCH folder under the machine's ``<cache>/pch``."""
    return pch_root / pch_signature()


def pch_header(pch_dir: Path) -> Path:
    return pch_dir / "torch" / "extension.h.gch"


def _ninja_cflags(build_directory: Path) -> tuple[str, list[str]] | None:
    """(compiler, flags) of main.cpp's compile from a finished build's ``build.ninja``."""
    try:
        text = (build_directory / "build.ninja").read_text()
    except OSError:
        return None
    compiler = re.search(r"^cxx[ \t]*=[ \t]*(.+)$", text, re.MULTILINE)
    cflags = re.search(r"^cflags[ \t]*=[ \t]*(.*)$", text, re.MULTILINE)
    post = re.search(r"^post_cflags[ \t]*=[ \t]*(.*)$", text, re.MULTILINE)
    if not compiler or not cflags:
        return None
    flags = shlex.split(cflags.group(1)) + (shlex.split(post.group(1)) if post else [])
    return compiler.group(1).strip(), [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def build_pch(pch_dir: Path, build_directory: Path, timeout_s: float = 300.0) -> str:
    """Precompile torch/extension.h with the flags of the build in ``build_directory``; returns
    what happened (for the build log). Never raises: a missing PCH only means a slower build."""
    target = pch_header(pch_dir)
    if target.exists():
        return "present"
    found = _ninja_cflags(build_directory)
    if found is None:
        return "skipped: no build.ninja to copy flags from"
    compiler, flags = found
    if "clang" in compiler:
        return "skipped: the host compiler is clang"
    header = find_torch_header("torch/extension.h")
    if header is None:
        return "skipped: torch/extension.h not found"
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(pch_dir / "build.lock"):
        if target.exists():
            return "present"
        temporary = target.with_name(f".extension.h.gch.{os.getpid()}.tmp")
        command = [*shlex.split(compiler), "-x", "c++-header", str(header), "-o", str(temporary), *flags]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            done = None
        if done is None or done.returncode != 0:
            temporary.unlink(missing_ok=True)
            return "failed: timed out" if done is None else f"failed: {done.stderr.strip()[-300:]}"
        temporary.replace(target)
    return "built"
