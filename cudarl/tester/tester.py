"""The tester: guard, compile, run in a sandbox, check, time — one ``Verdict`` per candidate.

Two halves, so that they can run in different processes or on different machines (the pool's
compile and bench workers call exactly these): ``build`` (guard and compile: CPUs, nvcc and, for
inline candidates, a CUDA-enabled torch) returns a ``Built`` record, with the build in the
compile cache; ``judge`` (load, correctness, timing, in a sandboxed judge process) takes it,
installing the build from an artifact first when this machine's cache lacks it. ``evaluate``
is both. Plain library code (no Ray). Every candidate runs in a fresh child process, so a crash,
a hang or a CUDA error costs that candidate and nothing else. Without a GPU the pipeline stops
after compiling and loading, and the verdict says which stages were skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cudarl import env
from cudarl.config import TesterConfig
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester import judgement
from cudarl.tester.build import compile_child
from cudarl.tester.build.artifact import ArtifactError, install_artifact, installed
from cudarl.tester.build.compile import (
    CompileCache,
    CompileOutcome,
    KernelModeUnsupported,
    compile_extension,
    compile_kernels,
    compile_limits,
    compile_nvrtc,
    cuda_cflags,
)
from cudarl.tester.build.guard import inspect_source
from cudarl.tester.build.toolchain import Toolchain, detect_toolchain, gpu_available, resolve_arch
from cudarl.tester.built import Built
from cudarl.tester.judging import judge as judge_entry
from cudarl.tester.judging.launch_shim import build_shim
from cudarl.tester.judging.reference_timing import ReferenceTimings
from cudarl.tester.kernel_names import compiled_kernel_names
from cudarl.tester.sandbox.parent import ChildLimits, WarmChildren, run_child
from cudarl.tester.verdict import Outcome, Stage, TimingStats, Verdict


def _touch(path: Path) -> None:
    """Create a flag file; its folder may be gone already (a judge that ended early)."""
    try:
        path.touch()
    except OSError:
        pass


class Tester:
    """Judges candidates against tasks. Safe to call from several threads (builds are locked)."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, config: TesterConfig | None = None, cache_root: Path | None = None) -> None:
        self.config = config or TesterConfig()
        root = cache_root or self.config.compile.cache_dir or env.cache_dir()
        self.cache = CompileCache(Path(root) / "compile")
        self.scratch = Path(root) / "runs"
        self.has_gpu = gpu_available()
        if self.config.sandbox.backend == "docker":  # refused here, in one line, not once per candidate
            from cudarl.tester.sandbox.docker_backend import client, ensure_image

            ensure_image(client())
        self.arch = resolve_arch(self.config.compile.arch, self.config.compile.fallback_arch)
        mode = self.config.compile.mode
        self.mode = ("extension" if self.has_gpu else "kernel") if mode == "auto" else mode
        # The inline_fast settings of every build (the compile child and the runner must agree);
        # the precompiled header lives beside the compile entries, in <cache>/pch, unless compile.pch_dir says.
        pch_root = self.config.compile.pch_dir or Path(root) / "pch"
        self.inline_fast = {"trim": self.config.compile.trim_includes,
                            "pch_root": str(pch_root) if self.config.compile.precompiled_header else None,
                            "split_nvcc": self.config.compile.split_nvcc,
                            "source_rules": self.config.hardening.static_rules}
        self._pch_lock = threading.Lock()
        self._pch_checked = False
        # Compile children that have imported torch before their job (started at the first build).
        self._warm_compile = (WarmChildren(compile_child.__name__,
                                           compile_limits(self.config.compile, self.config.sandbox),
                                           self.scratch, self.config.compile.warm_children)
                              if self.mode == "extension" and self.config.compile.warm_children > 0
                              and self.config.sandbox.backend == "namespace" else None)  # docker: a container a job
        self.pch_status = "not needed yet"
        # One lock file per physical GPU, beside the cache: every tester of the machine shares it.
        visible = (env.get(env.CUDA_VISIBLE_DEVICES) or "0").split(",")[0].strip() or "0"
        self.gpu_lock = (str(Path(root) / "gpu-locks" / f"{socket.gethostname()}-gpu-{visible}.lock")
                         if self.config.timing.gpu_turns != "off" else None)
        if self.gpu_lock:
            Path(self.gpu_lock).parent.mkdir(parents=True, exist_ok=True)
        # The runner's own-kernel knockout (judging.knockout): its judges preload the shim.
        if self.has_gpu and self.config.hardening.own_kernel_check:
            shim = build_shim(Path(root))
            if shim is not None:
                env.set_for_children(env.CUDARL_LAUNCH_SHIM, str(shim))
        # One reference timing per task at a time, shared by its judges (reference_timing.py).
        self.references = ReferenceTimings(self.config.timing.reference_reuse_s)
        # Judges started ahead of their candidates (runner, torch and CUDA up): sandbox.warm_judges.
        warm = self.config.sandbox.warm_judges
        warm = (2 if self.has_gpu else 0) if warm is None else warm
        runner = ("--warm-runner", *(("--warm-profiler",) if self.config.hardening.own_kernel_check else ()))
        self._warm_judges = (WarmChildren(judge_entry.__name__, ChildLimits.from_config(self.config.sandbox),
                                          self.scratch, warm, runner) if warm > 0 else None)
        # Reference-only judges need no runner; one is kept warm for the next new task.
        self._warm_references = (WarmChildren(judge_entry.__name__, ChildLimits.from_config(self.config.sandbox),
                                              self.scratch, 1) if warm > 0 and self.config.timing.enabled else None)

    @property
    def toolchain(self) -> Toolchain:
        return detect_toolchain()

    def evaluate(self, task: Task, candidate: Candidate) -> Verdict:
        """Run every stage this machine can run; never raises for a candidate's faults."""
        return self.judge(task, candidate, self.build(task, candidate))

    def build(self, task: Task, candidate: Candidate) -> Built:
        """Guard and compile (stages 1-2); the build lands in the compile cache. Thread-safe:
        callers may build many at once, then ``judge`` them, several at once if need be (their
        judges take turns on the GPU, ``timing.gpu_turns``, so timings do not disturb each other)."""
        verdict = Verdict.begin(task.id, candidate.id, candidate.source_hash)
        started = time.monotonic()
        guard = inspect_source(candidate.source, self.config.hardening.static_rules)
        verdict.stage_seconds["guard"] = time.monotonic() - started
        if not guard.ok:
            verdict.conclude(Outcome(guard.outcome), *guard.reasons)
            return Built(verdict, ready=False)
        verdict.stage = Stage.COMPILE
        builds = guard.nvrtc_builds if guard.format == "nvrtc" else guard.builds
        compiled = self._compile(candidate, builds, verdict, guard.format)
        if compiled is None or not compiled.ok:
            return Built(verdict, ready=False)
        names = sorted(set(guard.kernel_names) | compiled_kernel_names(compiled.report.kernels))
        return Built(verdict, ready=True, kernel_names=tuple(names))

    def judge(self, task: Task, candidate: Candidate, built: Built,
              artifact: Callable[[], bytes] | None = None) -> Verdict:
        """Load, check and time a built candidate (stages 3-5) in a sandboxed judge; ``built``'s
        verdict as is when it is not ready. ``artifact`` is called only when this machine's cache
        lacks the build (it was made elsewhere); it may raise for a lost artifact
        (``ArtifactError`` and Ray's errors reach the caller: the pool re-runs the item)."""
        verdict = built.verdict.model_copy(deep=True)
        key = built.cache_key
        if not built.ready or key is None or verdict.compile is None:
            return verdict
        if not installed(self.cache, key):
            if artifact is None:
                raise ArtifactError(f"the build {key} is not in this machine's compile cache and no artifact was given")
            started = time.monotonic()
            install_artifact(self.cache, key, artifact(), verdict.compile, built.artifact_sha256 or None)
            verdict.stage_seconds["artifact"] = time.monotonic() - started
        verdict.stage = Stage.LOAD
        self.scratch.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="eval-", dir=self.scratch))
        try:
            (workdir / "candidate.py").write_text(candidate.source)
            (workdir / "reference.py").write_text(task.source)
            self._run(task, key, workdir, verdict, list(built.kernel_names))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return verdict

    def _compile(self, candidate: Candidate, builds, verdict: Verdict, form: str = "inline") -> CompileOutcome | None:
        """The cached build, or a new one; the verdict gets the report and, on failure, its outcome."""
        config = self.config.compile
        # nvrtc candidates build the same way everywhere: NVRTC needs no GPU and no CUDA torch.
        mode = "nvrtc" if form == "nvrtc" else self.mode
        key = self.cache.key(candidate.source, mode, self.arch, cuda_cflags(config), self.toolchain,
                             self.config.hardening.static_rules)
        started = time.monotonic()
        with self.cache.locked(key):
            outcome = self.cache.lookup(key)
            if outcome is None:
                try:
                    if mode == "nvrtc" and builds and all(b.resolved for b in builds):
                        outcome = compile_nvrtc(builds, self.arch, config, self.config.sandbox,
                                                self.cache.build_root(key), key)
                    elif mode == "kernel":
                        outcome = compile_kernels(builds, self.arch, config, self.toolchain,
                                                  self.cache.entry(key) / "kernel", key, self.config.sandbox)
                    else:
                        self.cache.build_root(key).mkdir(parents=True, exist_ok=True)
                        if mode == "extension":
                            verdict.stage_seconds["pch"] = self.ensure_pch()
                        outcome = self._build_extension(candidate, key, mode)
                except KernelModeUnsupported as exc:
                    verdict.skipped.append(f"compile: {exc}")
                    verdict.conclude(Outcome.COMPILED, str(exc))
                    return None
                self.cache.store(key, outcome)
        verdict.stage_seconds["compile"] = time.monotonic() - started
        verdict.compile = outcome.report
        if not outcome.ok and outcome.report.refused:
            verdict.conclude(Outcome.REJECTED, *outcome.report.refused)
        elif not outcome.ok:
            failed = Outcome.COMPILE_TIMEOUT if outcome.timed_out else Outcome.COMPILE_ERROR
            verdict.conclude(Outcome.RESOURCE_LIMIT if outcome.report.limit_exceeded else failed,
                             outcome.report.errors or "the build failed without compiler output")
        return outcome

    def _build_extension(self, candidate: Candidate, key: str, mode: str) -> CompileOutcome:
        """The full ``load_inline`` build in a compile child, from a scratch folder holding only
        the candidate's source (removed after: the judge writes its own)."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="build-", dir=self.scratch))
        try:
            (folder / "candidate.py").write_text(candidate.source)
            warm = self._warm_compile.take() if self._warm_compile else None
            return compile_extension(folder / "candidate.py", self.cache.build_root(key), self.arch,
                                     self.config.compile, self.config.sandbox, key, mode, self.inline_fast,
                                     started=warm)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def ensure_pch(self) -> float:
        """Build the machine's precompiled header before the first inline build (once; other
        threads wait). Returns the seconds spent here (about 0 when it was there or is off)."""
        from cudarl.tester.build.pch_probe import ensure_pch

        started = time.monotonic()
        if self._warm_compile is not None:
            self._warm_compile.prime()  # importing torch while the header builds
        with self._pch_lock:
            if not self._pch_checked and self.inline_fast["pch_root"]:
                self.pch_status = ensure_pch(Path(self.inline_fast["pch_root"]), self.arch,
                                             cuda_cflags(self.config.compile), self.config.compile.jobs)
                self._pch_checked = True
        return time.monotonic() - started

    def _run(self, task: Task, key: str, workdir: Path, verdict: Verdict, kernel_names: list[str]) -> None:
        atol, rtol = task.tolerances(self.config.correctness.fp32_tolerance, self.config.correctness.half_tolerance)
        # Started first: the reference is timed while this candidate loads and is checked.
        reference = (self.references.get(hashlib.sha256(task.source.encode()).hexdigest(),
                                         lambda: self._time_reference(task))
                     if self.has_gpu and self.config.timing.enabled else None)
        job = judgement.judge_job(self.config, workdir, self.cache.build_root(key), self.arch, atol, rtol,
                                  task.hidden, kernel_names, inline_fast=self.inline_fast, gpu_lock=self.gpu_lock,
                                  load_only=not self.has_gpu and self.config.sandbox.load_only_judges)
        if reference is not None:  # the judge loads its candidate only once this file exists
            ready = workdir / f"reference-ready-{secrets.token_hex(8)}"
            job = job.with_changes(reference_ready=str(ready))
            reference.add_done_callback(lambda _done: _touch(ready))
        child = run_child(judge_entry.__name__, job.to_wire(), self._judge_limits(), cwd=workdir,
                          key=secrets.token_bytes(32), started=self._warm_judges.take() if self._warm_judges else None)
        result = judgement.read_judge(child, verdict, self.config)
        if result is not None and result.get("timing") and verdict.outcome == Outcome.PASSED:
            judgement.add_reference(verdict, result["timing"], reference)

    def _judge_limits(self) -> ChildLimits:
        limits = ChildLimits.from_config(self.config.sandbox)
        if self.gpu_lock:
            limits = dataclasses.replace(limits, turn_wait_s=self.config.timing.gpu_turn_wait_s)
        return limits

    def _time_reference(self, task: Task) -> TimingStats:
        """Time the task's reference in a reference-only judge (a process that never runs
        candidate code), in an exclusive GPU turn; raises ``ReferenceTimingFailed``."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="reference-", dir=self.scratch))
        try:
            (workdir / "reference.py").write_text(task.source)
            job = judgement.judge_job(self.config, workdir, workdir, self.arch, 0.0, 0.0, {}, [],
                                      gpu_lock=self.gpu_lock, reference_only=True)
            child = run_child(judge_entry.__name__, job.to_wire(), self._judge_limits(), cwd=workdir,
                              key=secrets.token_bytes(32),
                              started=self._warm_references.take() if self._warm_references else None)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return judgement.read_reference(child, self.config)
