"""Stage 2: build a candidate, once per content hash, and keep the compiler's resource report.

Two modes (``CompileConfig.mode``): ``extension`` runs the candidate's own ``load_inline`` calls
in a sandboxed child, steered to a cache directory and one architecture; ``kernel`` compiles just
the CUDA sources to a cubin with nvcc (no CUDA torch needed; nothing is runnable afterwards).
Candidates in the nvrtc format are always built by importing them in the child (``nvrtc``
mode): their ``cudarl.nvrtc`` kernels compile with NVRTC into the build folder, no GPU needed,
and the runner later loads those cubins.
Results, failures included, are cached under ``<cache>/<key>/report.json`` where the key hashes
the source, mode, flags, architecture and toolchain; a file lock makes concurrent builders of
the same key wait for one build instead of racing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from cudarl import _compat, nvrtc_build
from cudarl.config import CompileConfig, SandboxConfig
from cudarl.files import file_lock, write_text_atomic
from cudarl.tester.build import compile_child, nvcc_child
from cudarl.tester.build.compiler_output import parse_ptxas, trim_errors
from cudarl.tester.build.guard import InlineBuild
from cudarl.tester.build.loading import safe_name
from cudarl.tester.build.toolchain import Toolchain, torch_include_flags
from cudarl.tester.sandbox.parent import ChildLimits, StartedChild, discard_child, run_child
from cudarl.tester.verdict import CompileReport

# Flags torch's extension builder passes to nvcc; kernel mode uses them too, so that a kernel
# that compiles here also compiles in the full build.
TORCH_NVCC_FLAGS = (
    "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__", "-DTORCH_API_INCLUDE_EXTENSION_H",
)


@dataclass
class CompileOutcome:
    """A compile report plus what the pipeline needs: did it fail, did it time out."""

    report: CompileReport
    ok: bool
    timed_out: bool = False


_BUILD_FILE_LIMIT_MB = 512  # object files of big extensions exceed the run-time limit


BUILD_OPTION_RULES = "allowlist-1"
"""Part of every cache key: a build made before the build-option allowlist (``build_options``)
may hold options it refuses, and must not serve a tester that has it."""


class KernelModeUnsupported(Exception):
    """The candidate's sources are not literal, so kernel mode cannot see them."""


class CompileCache:
    """Compile results by key, on disk, shared by every process that uses the same root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def key(self, source: str, mode: str, arch: str, flags: list[str], toolchain: Toolchain,
            source_rules: bool = True) -> str:
        """The entry for one build. ``source_rules`` is part of it: a build made with the static
        rules off did not check the sources ``load_inline`` got, so it must not serve a tester
        that has them on (nor the other way round)."""
        blob = json.dumps([source, mode, arch, flags, toolchain.fingerprint, source_rules, BUILD_OPTION_RULES])
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def entry(self, key: str) -> Path:
        return self.root / key

    def build_root(self, key: str) -> Path:
        return self.entry(key) / "build"

    def lookup(self, key: str) -> CompileOutcome | None:
        path = self.entry(key) / "report.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        report = CompileReport.model_validate(data["report"])
        report.cached = True
        return CompileOutcome(report=report, ok=data["ok"], timed_out=data.get("timed_out", False))

    def store(self, key: str, outcome: CompileOutcome) -> None:
        if outcome.timed_out:
            return  # a timeout may be the machine's load, not the candidate: try again next time
        write_text_atomic(self.entry(key) / "report.json",
                          json.dumps({"report": outcome.report.model_dump(), "ok": outcome.ok}))

    def locked(self, key: str):
        return file_lock(self.root / f"{key}.lock")


def cuda_cflags(config: CompileConfig) -> list[str]:
    """Flags the tester adds to every CUDA compile, before the candidate's own."""
    return list(config.extra_cuda_cflags)


def compile_kernels(builds: list[InlineBuild], arch: str, config: CompileConfig, toolchain: Toolchain,
                    workdir: Path, key: str, sandbox: SandboxConfig) -> CompileOutcome:
    """Kernel mode: each build's CUDA source to a cubin with nvcc and ``ptxas -v``, in a compile
    child under the limits of every build (``nvcc_child``)."""
    if not builds or not all(b.resolved and b.cuda_sources for b in builds):
        raise KernelModeUnsupported("load_inline sources are not literal strings; kernel-only compile needs them")
    workdir.mkdir(parents=True, exist_ok=True)
    commands = []
    for build in builds:
        name = safe_name(build.name or "ext")
        source = workdir / f"{name}.cu"
        source.write_text("\n".join(build.cuda_sources))
        commands.append([str(toolchain.nvcc), "-cubin", f"-arch=sm_{arch}", "-Xptxas=-v", *TORCH_NVCC_FLAGS,
                         _compat.torch_cxx_standard(), *(f"-I{d}" for d in _compat.cuda_library_include_dirs()),
                         f"-DTORCH_EXTENSION_NAME={name}", *torch_include_flags(), *cuda_cflags(config),
                         *build.extra_cuda_cflags, "-o", str(workdir / f"{name}.cubin"), str(source)])
    limits = compile_limits(config, sandbox)
    scratch = Path(tempfile.mkdtemp(prefix="nvcc-", dir=workdir.parent))  # the compiler's temporary files
    job = {"workdir": str(workdir), "scratch": str(scratch), "commands": commands,
           "restrict_writes": sandbox.restrict_writes}
    try:
        if limits.backend == "docker":
            from cudarl.tester.sandbox.docker_backend import run_in_container

            headers = tuple(Path(d) for d in _compat.cuda_library_include_dirs())  # links into torch's wheels
            child = run_in_container(nvcc_child.__name__, job, limits, workdir, None, writable=(workdir, scratch),
                                     readable=headers)
        else:
            child = run_child(nvcc_child.__name__, job, limits, cwd=workdir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = child.last("result")
    log = "\n".join(result.get("logs", [])) if result else ""
    ok = bool(result and result.get("outcome") == "compiled")
    if child.timed_out:
        errors = f"compile timed out after {config.timeout_s:.0f} s and was killed"
    elif child.memory_exceeded:
        errors = f"compile exceeded the {sandbox.memory_limit_mb} MB memory limit and was killed"
    elif child.processes_exceeded:
        errors = f"the compiler started more than {sandbox.max_processes} processes; killed"
    elif result is None:
        errors = f"the compile process died ({child.signal_name or f'exit code {child.exit_code}'})"
    else:
        errors = "" if ok else trim_errors(log, config.error_lines)
    report = CompileReport(mode="kernel", arch=f"sm_{arch}", cache_key=key, cached=False,
                           seconds=child.wall_s, kernels=parse_ptxas(log), errors=errors)
    return CompileOutcome(report=report, ok=ok, timed_out=child.timed_out)


def compile_limits(config: CompileConfig, sandbox: SandboxConfig) -> ChildLimits:
    """The compile child's limits: the sandbox's, with the build's time limit, room for build
    files, the compiler's whole output and the builds' CPU priority."""
    return replace(ChildLimits.from_config(sandbox), timeout_s=config.timeout_s, output_limit_bytes=1 << 20,
                   nice=config.nice, backend=sandbox.backend,
                   file_size_limit_mb=max(sandbox.file_size_limit_mb, _BUILD_FILE_LIMIT_MB))


def compile_extension(candidate_path: Path, build_root: Path, arch: str, config: CompileConfig,
                      sandbox: SandboxConfig, key: str, mode: str = "extension",
                      inline_fast: dict | None = None, started: StartedChild | None = None) -> CompileOutcome:
    """Extension mode: import the candidate in a sandboxed child, which runs its own
    ``load_inline`` calls (steered) or, in the nvrtc format (``mode="nvrtc"``), its NVRTC builds.
    ``started``: a warm compile child to use (``WarmChildren``)."""
    limits = compile_limits(config, sandbox)
    job = {"kind": "compile", "candidate_path": str(candidate_path), "build_root": str(build_root),
           "arch": arch, "cuda_cflags": cuda_cflags(config), "jobs": config.jobs, "inline_fast": inline_fast,
           "restrict_writes": sandbox.restrict_writes}
    # The candidate's own (temporary) folder is its working folder: a relative write at import lands
    # there, under the file-size limit, instead of being refused outside the confined folders.
    if limits.backend == "docker":  # a container a build; the folders it writes are the only writable mounts
        from cudarl.tester.sandbox.docker_backend import run_in_container

        if started is not None:
            discard_child(started)
        child = run_in_container(compile_child.__name__, job, limits, candidate_path.parent, None,
                                 writable=(candidate_path.parent, build_root),
                                 readable=tuple(Path(p) for p in [(inline_fast or {}).get("pch_root")] if p))
    else:
        child = run_child(compile_child.__name__, job, limits, cwd=candidate_path.parent, started=started)
    result = child.last("result")
    log = child.stdout + "\n" + child.stderr
    ok = bool(result and result.get("outcome") == "compiled")
    if child.timed_out:
        errors = f"build timed out after {config.timeout_s:.0f} s and was killed"
    elif child.memory_exceeded:
        errors = f"build exceeded the {sandbox.memory_limit_mb} MB memory limit and was killed"
    elif child.processes_exceeded:
        errors = f"the candidate's import started more than {sandbox.max_processes} processes; killed"
    elif result is None:
        errors = (f"build process died ({child.signal_name or f'exit code {child.exit_code}'})\n"
                  + trim_errors(log, config.error_lines))
    elif not ok:
        errors = trim_errors(log + "\n" + "\n".join(result.get("reasons", [])), config.error_lines)
    else:
        errors = ""
    limit = "processes" if child.processes_exceeded else (
        "file size" if result is not None and result.get("outcome") == "resource_limit" else "")
    if limit == "file size":
        errors = f"the candidate wrote a file over the {limits.file_size_limit_mb} MB file size limit\n{errors}"
    refused = [str(r) for r in result.get("reasons", [])] if result and result.get("outcome") == "rejected" else []
    report = CompileReport(mode=mode, arch=f"sm_{arch}", cache_key=key, cached=False,
                           seconds=child.wall_s, kernels=parse_ptxas(child.stdout), errors=errors,
                           limit_exceeded=limit, refused=refused)
    return CompileOutcome(report=report, ok=ok, timed_out=child.timed_out)


def compile_nvrtc(builds: list, arch: str, config: CompileConfig, sandbox: SandboxConfig,
                  build_root: Path, key: str) -> CompileOutcome:
    """nvrtc format, kernel sources known statically: NVRTC in a small child that imports
    neither torch nor the candidate (``python -m cudarl.nvrtc_build``), cubins into the build
    folder the runner reads. Memory- and time-limited like every build."""
    import resource
    import sys

    def limit_memory() -> None:
        # RLIMIT_DATA, not RLIMIT_AS: NVRTC reserves address space it never touches, and under
        # an address-space limit of 16 GB its ptxas silently dropped the resource report.
        limit = sandbox.memory_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    job = {"arch": arch, "cache_dir": str(build_root / "nvrtc"),
           "builds": [{"source": b.source, "name": b.name, "options": list(b.options)} for b in builds]}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", nvrtc_build.__name__], input=json.dumps(job),
                              capture_output=True, text=True, timeout=config.timeout_s, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        report = CompileReport(mode="nvrtc", arch=f"sm_{arch}", cache_key=key, cached=False,
                               seconds=time.monotonic() - started,
                               errors=f"NVRTC timed out after {config.timeout_s:.0f} s and was killed")
        return CompileOutcome(report=report, ok=False, timed_out=True)
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    if result is None:
        errors = f"the NVRTC build process failed (exit code {done.returncode})\n{done.stderr[-2000:]}"
        log = ""
    else:
        log = "\n".join(k["log"] for k in result["kernels"])  # ptxas lines of the kernels that built
        errors = "" if result["ok"] else trim_errors(result["log"], config.error_lines)
    report = CompileReport(mode="nvrtc", arch=f"sm_{arch}", cache_key=key, cached=False,
                           seconds=time.monotonic() - started, kernels=parse_ptxas(log), errors=errors)
    return CompileOutcome(report=report, ok=bool(result and result["ok"]))
