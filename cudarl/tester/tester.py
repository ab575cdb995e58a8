"""The tester: guard, compile, run in a sandbox, check, time — one ``Verdict`` per candidate.

Plain library code (no Ray); the pool actors wrap it. Every candidate runs in a fresh child
process, so a crash, a hang or a CUDA error costs that candidate and nothing else. Without a GPU
the pipeline stops after compiling and loading, and the verdict says which stages were skipped.
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
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from cudarl import env
from cudarl.config import TesterConfig
from cudarl.tasks.task import Task
from cudarl.tester.candidate import Candidate
from cudarl.tester.compile import (CompileCache, compile_nvrtc, CompileOutcome, KernelModeUnsupported, compile_extension,
                                   compile_kernels, compile_limits, cuda_cflags)
from cudarl.tester.guard import inspect_source
from cudarl.tester.static_rules import compiled_kernel_names
from cudarl.tester.reference_timing import ReferenceTimingFailed, ReferenceTimings
from cudarl.tester.sandbox import ChildLimits, ChildOutcome, WarmChildren, run_child
from cudarl.tester.toolchain import Toolchain, detect_toolchain, gpu_available, resolve_arch
from cudarl.tester.verdict import (CorrectnessReport, HardeningReport, Outcome, SandboxReport, Stage, TimingReport,
                                   TimingStats, Verdict)

_NO_GPU = "no CUDA GPU on this machine"


def _where(child: ChildOutcome) -> str:
    last = child.last("stage")
    if not last:
        return "before the child reported any stage"
    detail = f" trial {last['trial']}" if "trial" in last else (f" ({last['model']})" if "model" in last else "")
    return f"during {last['stage']}{detail}"


def _touch(path: Path) -> None:
    """Create a flag file; its folder may be gone already (a judge that ended early)."""
    try:
        path.touch()
    except OSError:
        pass


def _stage_seconds(child: ChildOutcome) -> dict[str, float]:
    """Wall time per stage from the child's timestamped stage messages; timing and loading are split
    by model (``timing (reference)``, ``timing (candidate)``, ``load (candidate)``)."""
    marks = [(f"{m['stage']} ({m['model']})" if "model" in m else m["stage"], m["t"])
             for m in child.messages if m.get("event") in ("stage", "result") and "t" in m]
    seconds: dict[str, float] = {}
    for (stage, start), (_, end) in zip(marks, marks[1:]):
        seconds[stage] = seconds.get(stage, 0.0) + max(0.0, end - start)
    return seconds


def judge_job(config: TesterConfig, workdir: Path, build_root: Path, arch: str, atol: float, rtol: float,
              hidden: dict, kernel_names: list[str], cpu_correctness: bool = False,
              inline_fast: dict | None = None, gpu_lock: str | None = None, reference_only: bool = False) -> dict:
    """The job the judge reads on stdin: paths, the secret seed, tolerances, every setting it needs.
    ``cpu_correctness`` runs the correctness trials without a GPU (pure-PyTorch candidates, tests);
    ``inline_fast`` must be what the compile stage used (``Tester.inline_fast``); ``gpu_lock`` is the
    file behind the judge's turns on its GPU (``timing.gpu_turns``); ``reference_only`` asks the
    judge to time the task's reference and nothing else (``Tester._time_reference``)."""
    sandbox, hardening = config.sandbox, config.hardening
    return {
        "task_path": str(workdir / "reference.py"), "candidate_path": str(workdir / "candidate.py"),
        "build_root": str(build_root), "arch": arch, "cuda_cflags": cuda_cflags(config.compile),
        "jobs": config.compile.jobs, "seed": secrets.randbits(63), "trials": max(1, config.correctness.trials),
        "atol": atol, "rtol": rtol, "gpu_memory_fraction": sandbox.gpu_memory_fraction,
        "hidden": hidden, "hidden_trials": config.correctness.hidden_trials,
        "timing": config.timing.model_dump(), "cpu_correctness": cpu_correctness,
        "kernel_names": kernel_names, "own_kernel_check": hardening.own_kernel_check,
        "own_kernel_min_share": hardening.own_kernel_min_share,
        "side_stream_share": hardening.side_stream_share, "poison_memory": hardening.poison_memory,
        "fresh_timing_inputs": hardening.fresh_timing_inputs, "reset_persisting_l2": hardening.reset_persisting_l2,
        "drop_capabilities": hardening.drop_capabilities, "isolate_pids": sandbox.isolate_pids,
        "inline_fast": inline_fast, "gpu_lock": gpu_lock, "reference_only": reference_only,
    }


@dataclass
class Prepared:
    """A candidate after stages 1-2: the verdict so far and, if it compiled, where it lives."""

    task: Task
    verdict: Verdict
    compiled: CompileOutcome | None
    workdir: Path | None
    kernel_names: list[str] | None = None  # the candidate's own __global__ functions


class Tester:
    """Judges candidates against tasks. Safe to call from several threads (builds are locked)."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, config: TesterConfig | None = None, cache_root: Path | None = None) -> None:
        self.config = config or TesterConfig()
        root = cache_root or self.config.compile.cache_dir or env.cache_dir()
        self.cache = CompileCache(Path(root) / "compile")
        self.scratch = Path(root) / "runs"
        self.has_gpu = gpu_available()
        self.arch = resolve_arch(self.config.compile.arch, self.config.compile.fallback_arch)
        mode = self.config.compile.mode
        self.mode = ("extension" if self.has_gpu else "kernel") if mode == "auto" else mode
        # The inline_fast settings of every build (the compile child and the runner must agree);
        # the precompiled header lives beside the compile entries, in <cache>/pch.
        self.inline_fast = {"trim": self.config.compile.trim_includes,
                            "pch_root": str(Path(root) / "pch") if self.config.compile.precompiled_header else None,
                            "split_nvcc": self.config.compile.split_nvcc}
        self._pch_lock = threading.Lock()
        self._pch_checked = False
        # Compile children that have imported torch before their job (started at the first build).
        self._warm_compile = (WarmChildren("cudarl.tester.child", compile_limits(self.config.compile, self.config.sandbox),
                                           self.scratch, self.config.compile.warm_children)
                              if self.mode == "extension" and self.config.compile.warm_children > 0 else None)
        self.pch_status = "not needed yet"
        # One lock file per physical GPU, beside the cache: every tester of the machine shares it.
        visible = (env.get(env.CUDA_VISIBLE_DEVICES) or "0").split(",")[0].strip() or "0"
        self.gpu_lock = (str(Path(root) / "gpu-locks" / f"{socket.gethostname()}-gpu-{visible}.lock")
                         if self.config.timing.gpu_turns != "off" else None)
        if self.gpu_lock:
            Path(self.gpu_lock).parent.mkdir(parents=True, exist_ok=True)
        # One reference timing per task at a time, shared by its judges (reference_timing.py).
        self.references = ReferenceTimings(self.config.timing.reference_reuse_s)
        # Judges started ahead of their candidates (runner, torch and CUDA up): sandbox.warm_judges.
        warm = self.config.sandbox.warm_judges
        warm = (2 if self.has_gpu else 0) if warm is None else warm
        runner = ("--warm-runner", *(("--warm-profiler",) if self.config.hardening.own_kernel_check else ()))
        self._warm_judges = (WarmChildren("cudarl.tester.judge", ChildLimits.from_config(self.config.sandbox),
                                          self.scratch, warm, runner) if warm > 0 else None)
        # Reference-only judges need no runner; one is kept warm for the next new task.
        self._warm_references = (WarmChildren("cudarl.tester.judge", ChildLimits.from_config(self.config.sandbox),
                                              self.scratch, 1) if warm > 0 and self.config.timing.enabled else None)

    @property
    def toolchain(self) -> Toolchain:
        return detect_toolchain()

    def evaluate(self, task: Task, candidate: Candidate) -> Verdict:
        """Run every stage this machine can run; never raises for a candidate's faults."""
        return self.run(self.prepare(task, candidate))

    def prepare(self, task: Task, candidate: Candidate) -> "Prepared":
        """Stages 1-2 (guard and compile). Thread-safe; callers may build many at once, then
        ``run`` them, several at once if need be: their judges take turns on the GPU
        (``timing.gpu_turns``), so timings do not disturb each other."""
        verdict = Verdict(task_id=task.id, candidate_id=candidate.id, candidate_hash=candidate.source_hash,
                          stage=Stage.GUARD, outcome=Outcome.HARNESS_ERROR)
        started = time.monotonic()
        guard = inspect_source(candidate.source, self.config.hardening.static_rules)
        verdict.stage_seconds["guard"] = time.monotonic() - started
        if not guard.ok:
            verdict.outcome = Outcome(guard.outcome)
            verdict.reasons = guard.reasons
            return Prepared(task, verdict, None, None)
        kernel_names = guard.kernel_names
        self.scratch.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="eval-", dir=self.scratch))
        (workdir / "candidate.py").write_text(candidate.source)
        (workdir / "reference.py").write_text(task.source)
        verdict.stage = Stage.COMPILE
        try:
            builds = guard.nvrtc_builds if guard.format == "nvrtc" else guard.builds
            compiled = self._compile(candidate, builds, workdir, verdict, guard.format)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if compiled is None or not compiled.ok:
            shutil.rmtree(workdir, ignore_errors=True)
            return Prepared(task, verdict, None, None)
        names = sorted(set(kernel_names) | compiled_kernel_names(compiled.report.kernels))
        return Prepared(task, verdict, compiled, workdir, names)

    def run(self, prepared: "Prepared") -> Verdict:
        """Stages 3-5 in a sandboxed child, for a candidate that compiled."""
        if prepared.compiled is None or prepared.workdir is None:
            return prepared.verdict
        try:
            prepared.verdict.stage = Stage.LOAD
            self._run(prepared.task, prepared.compiled, prepared.workdir, prepared.verdict,
                      prepared.kernel_names or [])
            return prepared.verdict
        finally:
            shutil.rmtree(prepared.workdir, ignore_errors=True)

    def _compile(self, candidate: Candidate, builds, workdir: Path, verdict: Verdict,
                 form: str = "inline") -> CompileOutcome | None:
        config = self.config.compile
        # nvrtc candidates build the same way everywhere: NVRTC needs no GPU and no CUDA torch.
        mode = "nvrtc" if form == "nvrtc" else self.mode
        key = self.cache.key(candidate.source, mode, self.arch, cuda_cflags(config), self.toolchain)
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
                                                  self.cache.entry(key) / "kernel", key)
                    else:
                        self.cache.build_root(key).mkdir(parents=True, exist_ok=True)
                        if mode == "extension":
                            verdict.stage_seconds["pch"] = self.ensure_pch()
                        warm = self._warm_compile.take() if self._warm_compile else None
                        outcome = compile_extension(workdir / "candidate.py", self.cache.build_root(key),
                                                    self.arch, config, self.config.sandbox, key, mode,
                                                    self.inline_fast, started=warm)
                except KernelModeUnsupported as exc:
                    verdict.skipped.append(f"compile: {exc}")
                    verdict.outcome = Outcome.COMPILED
                    verdict.reasons = [str(exc)]
                    return None
                self.cache.store(key, outcome)
        verdict.stage_seconds["compile"] = time.monotonic() - started
        verdict.compile = outcome.report
        if not outcome.ok:
            verdict.outcome = Outcome.COMPILE_TIMEOUT if outcome.timed_out else Outcome.COMPILE_ERROR
            if outcome.report.limit_exceeded:
                verdict.outcome = Outcome.RESOURCE_LIMIT
            verdict.reasons = [outcome.report.errors or "the build failed without compiler output"]
        return outcome

    def ensure_pch(self) -> float:
        """Build the machine's precompiled header before the first inline build (once; other
        threads wait). Returns the seconds spent here (about 0 when it was there or is off)."""
        from cudarl.tester.inline_fast import ensure_pch

        started = time.monotonic()
        if self._warm_compile is not None:
            self._warm_compile.prime()  # importing torch while the header builds
        with self._pch_lock:
            if not self._pch_checked and self.inline_fast["pch_root"]:
                self.pch_status = ensure_pch(Path(self.inline_fast["pch_root"]), self.arch,
                                             cuda_cflags(self.config.compile), self.config.compile.jobs)
                self._pch_checked = True
        return time.monotonic() - started

    def _run(self, task: Task, compiled: CompileOutcome, workdir: Path, verdict: Verdict,
             kernel_names: list[str]) -> None:
        sandbox = self.config.sandbox
        atol, rtol = task.tolerances(self.config.correctness.fp32_tolerance, self.config.correctness.half_tolerance)
        # Started first: the reference is timed while this candidate loads and is checked.
        reference = (self.references.get(hashlib.sha256(task.source.encode()).hexdigest(),
                                         lambda: self._time_reference(task))
                     if self.has_gpu and self.config.timing.enabled else None)
        job = judge_job(self.config, workdir, self.cache.build_root(compiled.report.cache_key), self.arch,
                        atol, rtol, task.hidden, kernel_names, inline_fast=self.inline_fast, gpu_lock=self.gpu_lock)
        if reference is not None:  # the judge loads its candidate only once this file exists
            job["reference_ready"] = str(workdir / f"reference-ready-{secrets.token_hex(8)}")
            reference.add_done_callback(lambda _done: _touch(Path(job["reference_ready"])))
        child = run_child("cudarl.tester.judge", job, self._judge_limits(), cwd=workdir, key=secrets.token_bytes(32),
                          started=self._warm_judges.take() if self._warm_judges else None)
        verdict.sandbox = SandboxReport(exit_code=child.exit_code, signal=child.signal_name, wall_s=child.wall_s,
                                        network_isolated=child.network_isolated, stdout=child.stdout,
                                        stderr=child.stderr, output_truncated=child.output_truncated)
        verdict.stage_seconds.update(_stage_seconds(child))
        verdict.stage_seconds["run"] = child.wall_s
        result = child.last("result")
        last_stage = child.last("stage")
        if last_stage:
            verdict.stage = Stage(last_stage["stage"])
        if child.turn_wait_exceeded:
            verdict.outcome = Outcome.HARNESS_ERROR
            verdict.reasons = [f"waited more than timing.gpu_turn_wait_s = {self.config.timing.gpu_turn_wait_s:.0f} s "
                               f"for turns on the GPU {_where(child)} (other judges held it); not the candidate's fault"]
        elif child.timed_out:
            verdict.outcome = Outcome.TIMEOUT
            verdict.reasons = [f"killed after {sandbox.timeout_s:.0f} s wall-clock {_where(child)}"]
        elif child.memory_exceeded:
            verdict.outcome = Outcome.MEMORY_LIMIT
            verdict.reasons = [f"host memory above {sandbox.memory_limit_mb} MB {_where(child)}; killed"]
        elif child.processes_exceeded:
            verdict.outcome = Outcome.RESOURCE_LIMIT
            verdict.reasons = [f"more than {sandbox.max_processes} processes {_where(child)}; killed"]
        elif result is None:
            verdict.outcome = Outcome.CRASHED
            how = f"was killed by {child.signal_name}" if child.signal_name else f"exited with code {child.exit_code}"
            tail = child.stderr.strip().splitlines()[-5:]
            verdict.reasons = [f"the candidate's process {how} {_where(child)} without reporting a result"
                               + ("\n" + "\n".join(tail) if tail else "")]
        else:
            self._apply_result(result, verdict)
            if result.get("timing") and verdict.outcome == Outcome.PASSED:
                self._add_reference(verdict, result["timing"], reference)
        if child.forged_messages:
            verdict.hardening = verdict.hardening or HardeningReport()
            verdict.hardening.forged_messages = child.forged_messages
            if verdict.correct:
                verdict.outcome = Outcome.REJECTED
                verdict.reasons = [f"[channel] {child.forged_messages} unauthenticated message(s) reached "
                                   "the result channel"]
        if result is not None and result.get("outcome") == "loaded":
            verdict.skipped += [f"correctness: {_NO_GPU}", f"timing: {_NO_GPU}"]

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
            job = judge_job(self.config, workdir, workdir, self.arch, 0.0, 0.0, {}, [], gpu_lock=self.gpu_lock,
                            reference_only=True)
            child = run_child("cudarl.tester.judge", job, self._judge_limits(), cwd=workdir,
                              key=secrets.token_bytes(32),
                              started=self._warm_references.take() if self._warm_references else None)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        result = child.last("result")
        if child.turn_wait_exceeded:
            raise ReferenceTimingFailed(f"it waited more than timing.gpu_turn_wait_s = "
                                        f"{self.config.timing.gpu_turn_wait_s:.0f} s for an exclusive GPU turn")
        if child.timed_out or result is None:
            how = "timed out" if child.timed_out else f"ended ({child.signal_name or child.exit_code}) without a result"
            tail = " / ".join(child.stderr.strip().splitlines()[-3:])
            raise ReferenceTimingFailed(f"its process {how} {_where(child)}" + (f": {tail}" if tail else ""))
        if result.get("outcome") != "reference" or child.forged_messages:
            raise ReferenceTimingFailed("; ".join(result.get("reasons", [])) or f"outcome {result.get('outcome')}")
        return TimingStats.model_validate(result["reference"])

    def _add_reference(self, verdict: Verdict, timing: dict, reference: Future | None) -> None:
        """Complete a passed verdict's timing with the task's shared reference timing (waiting
        for it if it is still being measured); without one the verdict is ``harness_error``."""
        candidate = TimingStats.model_validate(timing["candidate"])
        started = time.monotonic()
        try:
            if reference is None:
                raise ReferenceTimingFailed("no reference timing was started")
            measured = reference.result()
        except Exception as exc:  # noqa: BLE001 - a failed reference is the harness's problem, never the candidate's
            verdict.outcome = Outcome.HARNESS_ERROR
            verdict.reasons = [f"the candidate was correct and timed ({candidate.median_ms:.4f} ms median) but the "
                               f"reference could not be timed: {exc}"]
            return
        finally:
            verdict.stage_seconds["timing (reference wait)"] = time.monotonic() - started
        verdict.timing = TimingReport(candidate=candidate, reference=measured.stats,
                                      speedup=measured.stats.median_ms / candidate.median_ms
                                      if candidate.median_ms > 0 else 0.0,
                                      l2_flush_bytes=timing["l2_flush_bytes"], device=timing["device"],
                                      reference_age_s=measured.age_s())

    @staticmethod
    def _apply_result(result: dict, verdict: Verdict) -> None:
        name = result["outcome"]
        verdict.outcome = Outcome.COMPILED if name == "loaded" else Outcome(name)
        verdict.stage = Stage(result["stage"])
        verdict.reasons = list(result.get("reasons", []))
        if result.get("correctness"):
            verdict.correctness = CorrectnessReport.model_validate(result["correctness"])
        if result.get("hardening"):
            verdict.hardening = HardeningReport.model_validate(result["hardening"])
