"""The verdict: one typed, JSON-serializable record of everything the tester found.

Every reward, dataset filter and served answer is computed from verdicts, so a verdict says
which stage was reached, what happened there, every figure measured, and why a candidate was
rejected (``reasons``; never empty when the outcome is not a pass).
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class Stage(str, Enum):
    """Pipeline stages in order; ``Verdict.stage`` is the last one entered."""

    GUARD = "guard"
    COMPILE = "compile"
    LOAD = "load"
    CORRECTNESS = "correctness"
    TIMING = "timing"
    DONE = "done"


class Outcome(str, Enum):
    """What happened. Only ``PASSED`` (and ``CORRECT`` when timing is off) are correct."""

    PASSED = "passed"  # correct and timed
    CORRECT = "correct"  # correct, timing disabled
    COMPILED = "compiled"  # stages 1-2 only (no GPU here)
    REJECTED = "rejected"  # a hardening rule refused it (static or at run time); reasons name the rule
    FORMAT_ERROR = "format_error"  # a policy's answer held no usable candidate (cudarl.agents.parsing)
    PARSE_ERROR = "parse_error"
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    LOAD_ERROR = "load_error"  # import or construction of ModelNew failed
    RUNTIME_ERROR = "runtime_error"  # a Python exception in forward
    CUDA_ERROR = "cuda_error"  # a CUDA error (illegal access, launch failure, ...)
    CRASHED = "crashed"  # the child died (signal, os._exit) without a verdict
    TIMEOUT = "timeout"  # the child ran past its wall-clock limit and was killed
    MEMORY_LIMIT = "memory_limit"  # host or GPU memory limit exceeded
    RESOURCE_LIMIT = "resource_limit"  # too many processes or too large a file
    INCORRECT = "incorrect"
    HARNESS_ERROR = "harness_error"  # the tester itself failed (not the candidate's fault)


class KernelResources(BaseModel):
    """One kernel's compiler resource report (from ``ptxas -v``)."""

    name: str
    mangled_name: str
    arch: str
    registers: int = 0
    shared_memory_bytes: int = 0
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0


class CompileReport(BaseModel):
    mode: str
    arch: str
    cache_key: str
    cached: bool
    seconds: float
    kernels: list[KernelResources] = Field(default_factory=list)
    errors: str = ""  # trimmed, readable compiler errors (empty on success)
    limit_exceeded: str = ""  # "processes" or "file size" when the build was stopped by a limit
    refused: list[str] = Field(default_factory=list)  # static-rule reasons for the sources the build got


class TrialFailure(BaseModel):
    trial: int
    reason: str


class CorrectnessReport(BaseModel):
    trials_run: int = 0
    trials_passed: int = 0
    hidden_trials_run: int = 0  # trials on the task's hidden shape set
    hidden_trials_passed: int = 0
    atol: float
    rtol: float
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    first_failure: TrialFailure | None = None


class TimingStats(BaseModel):
    """Milliseconds per call; ``rse`` is the relative standard error of the mean."""

    median_ms: float
    mean_ms: float
    stdev_ms: float
    min_ms: float
    count: int
    rse: float
    off_stream_runs: int = 0  # runs whose work outlasted the stream (charged device time)
    late_runs: int = 0  # off-stream runs whose late work was at least half the stream's time
    clock_violations: int = 0  # runs whose event time exceeded the host clock around them


class TimingReport(BaseModel):
    candidate: TimingStats
    reference: TimingStats
    speedup: float  # reference median / candidate median
    l2_flush_bytes: int
    device: str
    reference_age_s: float = 0.0  # seconds from the end of the (shared) reference timing to this verdict


class KernelLaunch(BaseModel):
    """A kernel seen in the profiled forward."""

    name: str
    microseconds: float
    launches: int
    own: bool  # one of the candidate's own kernels


class HardeningReport(BaseModel):
    """What the runtime defenses saw (empty when the run stopped before them)."""

    kernels: list[KernelLaunch] = Field(default_factory=list)
    own_time_share: float | None = None  # share of forward's kernel time in the candidate's kernels ("coverage")
    # whether forward's output changed when the own kernels' results were poisoned (None: not observed)
    own_result_dependency: bool | None = None
    notes: list[str] = Field(default_factory=list)  # isolation applied, checks skipped and why
    forged_messages: int = 0  # unauthenticated messages on the result channel (ignored)


class SandboxReport(BaseModel):
    exit_code: int | None = None
    signal: str | None = None
    wall_s: float = 0.0
    network_isolated: bool = False
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False


class Verdict(BaseModel):
    model_config = ConfigDict(use_enum_values=False)

    task_id: str
    candidate_id: str
    candidate_hash: str
    stage: Stage
    outcome: Outcome
    reasons: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # stages not run, and why
    compile: CompileReport | None = None
    correctness: CorrectnessReport | None = None
    timing: TimingReport | None = None
    sandbox: SandboxReport | None = None
    hardening: HardeningReport | None = None
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    shared: bool = False
    """Judged once for an identical candidate (same task, same source) submitted earlier or at
    the same time to the tester pool; everything but the ids is that judgement's."""

    @classmethod
    def begin(cls, task_id: str, candidate_id: str, candidate_hash: str) -> Verdict:
        """A verdict before any stage ran (``harness_error`` until a stage says otherwise)."""
        return cls(task_id=task_id, candidate_id=candidate_id, candidate_hash=candidate_hash, stage=Stage.GUARD,
                   outcome=Outcome.HARNESS_ERROR)

    def conclude(self, outcome: Outcome, *reasons: str, stage: Stage | None = None) -> Verdict:
        """Set the outcome and its reasons together (and the stage, when given); returns ``self``."""
        self.outcome = outcome
        self.reasons = list(reasons)
        if stage is not None:
            self.stage = stage
        return self

    @property
    def correct(self) -> bool:
        return self.outcome in (Outcome.PASSED, Outcome.CORRECT)

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if self.timing else None

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.model_validate_json(text)
