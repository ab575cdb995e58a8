"""Loading reference and candidate modules inside a child, and steering their ``load_inline``.

Every ``load_inline`` call a candidate makes is redirected to a build directory owned by the
tester (one per candidate hash and extension name), built for one architecture with the
tester's flags, with the compiler's output (including ``ptxas -v``) on stdout. The compile
child and the run child install the same hook, so the run child finds the extension already
built and only loads it: a manifest beside the library (``ARTIFACT_MANIFEST``) names it and the
path-free key it was built for, so the build folder is an artifact that loads on another machine
or at another path (compile on a CPU-only worker, load on a GPU worker) without ninja.
In ``stub`` mode (no GPU, compile-only runs) nothing is built: the
extension is replaced by an object whose functions raise, so that importing and constructing
``ModelNew`` can still be checked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import re
from pathlib import Path
from types import ModuleType

from cudarl import env
from cudarl.files import write_text_atomic
from cudarl.tester.build import inline_fast, nvcc_split


class StubExtension:
    """Stands in for an extension that compile-only mode did not build."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str):
        def not_built(*_args, **_kwargs):
            raise RuntimeError(f"extension {self._name!r} was not built (compile-only mode)")

        return not_built


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "ext"


def arch_list_entry(arch: str) -> str:
    """'90' -> '9.0', '100a' -> '10.0a' (the form TORCH_CUDA_ARCH_LIST wants)."""
    digits = arch.removeprefix("sm_")
    suffix = digits[-1] if digits[-1].isalpha() else ""
    number = digits.rstrip("abcdefghijklmnopqrstuvwxyz")
    return f"{number[:-1]}.{number[-1]}{suffix}"


class SourceRefused(RuntimeError):
    """The sources a ``load_inline`` call was given break the CUDA/C++ text rules."""


def refused_sources(arguments: dict, check_native_source) -> list[str]:
    """The static rules' reasons (``check_native_source``, bound before any candidate code ran)
    against the C++ and CUDA sources exactly as ``load_inline`` got them: the guard sees only
    string constants, and a source assembled at run time (``"sys" + "tem("``) reaches the
    compiler unseen otherwise."""
    return [f"{v} (in the sources given to load_inline)" for v in check_native_source(source_text(arguments))]


def source_text(arguments: dict) -> str:
    """The C++ and CUDA sources among ``load_inline``'s arguments, as one text."""
    texts = []
    for key in ("cpp_sources", "cuda_sources"):
        value = arguments.get(key) or []
        texts += [value] if isinstance(value, str) else [str(part) for part in value]
    return "\n".join(texts)


def install_load_inline_hook(build_root: Path, arch: str, cuda_cflags: list[str],
                             jobs: int, stub: bool, fast: dict | None = None,
                             refusals: list[str] | None = None) -> list[str]:
    """Patch ``torch.utils.cpp_extension.load_inline``; returns the list the hook appends
    extension names to (so the caller can report what was built). ``fast`` turns on the
    measures of ``inline_fast``: ``{"trim": bool, "pch_root": folder or None}``, and with
    ``"source_rules"`` the static text rules on the sources each call gets: a call that breaks
    them raises ``SourceRefused`` before anything is built, and its reasons go into
    ``refusals`` (kept even if the candidate catches the exception). The compile child and the
    runner must pass the same, or the runner rebuilds."""
    from cudarl import _compat
    from cudarl.build_rules import refused_includes
    from cudarl.tester.build.build_options import refused_build_options
    from cudarl.tester.build.static_rules import check_native_source

    cpp = _compat.import_cpp_extension()
    env.set_for_children(env.TORCH_CUDA_ARCH_LIST, arch_list_entry(arch))
    env.set_for_children(env.MAX_JOBS, str(jobs))
    env.set_for_children(env.CUDARL_NVRTC_DIR, str(build_root / "nvrtc"))  # nvrtc-format cubins
    env.set_for_children(env.CUDARL_CUDA_ARCH, arch)
    options = fast or {}
    if options.get("split_nvcc") and not env.get(env.PYTORCH_NVCC) and getattr(cpp, "CUDA_HOME", None):
        env.set_for_children(env.PYTORCH_NVCC, nvcc_split.command(os.path.join(cpp.CUDA_HOME, "bin", "nvcc")))
    pch_dir = str(inline_fast.pch_dir_for(Path(options["pch_root"]))) if options.get("pch_root") else None
    original = cpp.load_inline
    signature = inspect.signature(original)
    # The lighter header replaces the torch include load_inline adds itself, so it needs a
    # load_inline that can leave it out.
    lightable = "no_implicit_headers" in signature.parameters
    built: list[str] = []

    harness_environment = env.snapshot_environment()

    def load_inline(*args, **kwargs):
        env.restore_environment(harness_environment)  # the candidate's os.environ changes stop here
        bound = signature.bind(*args, **kwargs)
        name = str(bound.arguments.get("name", "ext"))
        # always, static rules or not: the compiler reads and writes files
        problems = refused_build_options(bound.arguments) + refused_includes(source_text(bound.arguments))
        if options.get("source_rules"):
            problems += refused_sources(bound.arguments, check_native_source)
        if problems:
            if refusals is not None:
                refusals.extend(problems)
            raise SourceRefused("; ".join(problems))
        built.append(name)
        if stub:
            return StubExtension(name)
        directory = build_root / safe_name(name)
        directory.mkdir(parents=True, exist_ok=True)
        key = artifact_key(bound.arguments, arch, cuda_cflags, options)
        prebuilt = load_artifact(directory, key)
        if prebuilt is not None:
            return prebuilt
        (directory / ARTIFACT_MANIFEST).unlink(missing_ok=True)  # stale the moment a build starts
        module = build(bound, directory, name)
        record_artifact(directory, key, module)
        return module

    def build(bound: inspect.BoundArguments, directory: Path, name: str):
        """The fast build (precompiled header, lighter torch header) when it applies; if it
        fails, the stock build exactly as ``load_inline`` would run it, whose result and errors
        are the verdict's (a broken candidate pays for both builds)."""
        bound.arguments["build_directory"] = str(directory)
        bound.arguments["verbose"] = True
        user_flags = list(bound.arguments.get("extra_cuda_cflags") or [])
        bound.arguments["extra_cuda_cflags"] = [*cuda_cflags, "-Xptxas=-v", *user_flags]
        includes = list(bound.arguments.get("extra_include_paths") or [])
        bound.arguments["extra_include_paths"] = [*includes, *_compat.cuda_library_include_dirs()]
        stock = dict(bound.arguments)
        fast = fast_arguments(stock, pch_dir, directory, bool(options.get("trim") and lightable))
        if fast is None or (directory / inline_fast.UNTRIMMED_MARKER).exists():
            return original(*bound.args, **bound.kwargs)
        bound.arguments.update(fast)
        try:
            return original(*bound.args, **bound.kwargs)
        except Exception:  # noqa: BLE001 - the stock build gives the real result (and errors)
            print("cudarl: the fast build (precompiled or lighter torch header) failed; building as stock "
                  "load_inline would", flush=True)
            (directory / inline_fast.UNTRIMMED_MARKER).write_text("")
            _compat.forget_extension_version(cpp, name)
            bound.arguments.clear()
            bound.arguments.update(stock)
            return original(*bound.args, **bound.kwargs)

    cpp.load_inline = load_inline
    return built


ARTIFACT_MANIFEST = "cudarl-artifact.json"


def artifact_key(arguments: dict, arch: str, cuda_cflags: list[str], options: dict) -> str:
    """What a built extension depends on, free of absolute paths: the candidate's own
    ``load_inline`` arguments, the architecture, cudarl's flags and measures, torch's version."""
    import torch

    own = {k: v for k, v in arguments.items() if k not in ("build_directory", "verbose")}
    measures = {"trim": bool(options.get("trim")), "pch": bool(options.get("pch_root")),
                "split_nvcc": bool(options.get("split_nvcc"))}
    blob = json.dumps([own, arch, cuda_cflags, measures, torch.__version__], sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


def load_artifact(directory: Path, key: str) -> ModuleType | None:
    """The extension built earlier in ``directory`` for ``key``, imported without asking ninja
    (whose build file holds absolute paths): so a build folder is an artifact that can be
    copied to another machine, or another path, and loaded there. None when there is none, or
    when anything about it does not match (then the caller builds as usual)."""
    try:
        manifest = json.loads((directory / ARTIFACT_MANIFEST).read_text())
        library = directory / str(manifest["file"])
        if (manifest["key"] != key or not library.is_file() or library.resolve().parent != directory.resolve()
                or library.stat().st_size != manifest["size"]):
            return None
        spec = importlib.util.spec_from_file_location(str(manifest["module"]), library)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except Exception:  # noqa: BLE001 - a damaged artifact is rebuilt, never blamed on the candidate
        return None


def record_artifact(directory: Path, key: str, module) -> None:
    """After a successful build: which library in ``directory`` is the extension for ``key``
    (with its size, so a truncated copy does not pass for it). Every build removes the manifest
    first, so a library rebuilt for another key never sits under an old manifest."""
    library = Path(getattr(module, "__file__", "") or "")
    if isinstance(module, ModuleType) and library.is_file() and library.resolve().parent == directory.resolve():
        write_text_atomic(directory / ARTIFACT_MANIFEST, json.dumps({
            "key": key, "file": library.name, "module": module.__name__, "size": library.stat().st_size}))


def _as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def fast_arguments(stock: dict, pch_dir: str | None, directory: Path, trim: bool) -> dict | None:
    """The ``load_inline`` arguments that change for the fast build, or None when nothing
    would: the precompiled header's folder first on the include path (not with the
    candidate's own ``extra_cflags``), and the lighter torch header (written into
    ``directory``). A ``#include <torch/extension.h>`` of the candidate's C++ source becomes a
    comment: the bindings file already starts with it, and GCC, having used the precompiled
    header there, fails on a second include of it."""
    changes: dict = {}
    if pch_dir and not stock.get("extra_cflags"):
        changes["extra_include_paths"] = [pch_dir, *stock["extra_include_paths"]]
        if not stock.get("no_implicit_headers"):
            cpp_sources = _as_list(stock.get("cpp_sources"))
            without = [_REPEATED_TORCH_INCLUDE.sub(r"// \g<0> (already included)", text) for text in cpp_sources]
            if without != cpp_sources:
                changes["cpp_sources"] = without
    light = light_arguments({**stock, **changes}) if trim else None
    if light is not None:
        header, arguments = light
        header_path = directory / inline_fast.LIGHT_HEADER
        if not header_path.exists() or header_path.read_text() != header:  # unchanged: ninja has nothing to do
            write_text_atomic(header_path, header)
        changes.update(arguments)
    return changes or None


_REPEATED_TORCH_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"]", re.M)


def light_arguments(arguments: dict) -> tuple[str, dict] | None:
    """(the lighter header's text, the load_inline arguments that use it), or None where the
    CUDA sources need the full header. The implicit headers load_inline would add are written
    out (the torch one lightened), so both files keep the lines of a stock build."""
    cuda_sources = _as_list(arguments.get("cuda_sources"))
    if not cuda_sources:
        return None
    cpp_sources = _as_list(arguments.get("cpp_sources"))
    if not arguments.get("no_implicit_headers"):
        cuda_sources = [*inline_fast.IMPLICIT_CUDA_HEADERS, *cuda_sources]
        cpp_sources = [inline_fast.IMPLICIT_CPP_HEADER, *cpp_sources]
    header = inline_fast.light_header(cuda_sources)
    if header is None:
        return None
    return header, {"cuda_sources": inline_fast.trimmed_sources(cuda_sources), "cpp_sources": cpp_sources,
                    "no_implicit_headers": True}
