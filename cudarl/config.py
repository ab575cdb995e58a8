"""Typed settings for every part of cudarl, loaded from TOML.

Each field carries a docstring (pydantic turns it into the field's description, so
``cudarl config`` can print it). Defaults live here (the ``[sft]`` table's in ``config_sft.py``) and
nowhere else. Unknown keys are errors:
a misspelled setting must not be silently ignored.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, Field, ValidationError, model_validator

from cudarl.config_base import ConfigError, _Section
from cudarl.config_rl import AlgorithmConfig, RewardConfig, TrainConfig
from cudarl.config_serve import ServeConfig
from cudarl.config_sft import SftConfig
from cudarl.files import read_text

_ARCH = r"^(sm_)?[0-9]{2,3}[a-z]?$"  # 90, sm_90, 90a


class CompileConfig(_Section):
    mode: Literal["auto", "extension", "kernel"] = "auto"
    """How candidates are built. ``extension``: the full ``load_inline`` build (needs a CUDA
    build of torch; this is what runs on the GPU). ``kernel``: only the CUDA source, to a cubin
    with ``nvcc`` (fast, works with any torch; catches compile errors and gives the resource
    report, but nothing can run). ``auto``: extension when a GPU is present, else kernel.
    nvrtc-format candidates ignore it: NVRTC builds them the same way everywhere."""

    arch: str | None = Field(default=None, pattern=_ARCH)
    """Target architecture, e.g. ``"90"`` for sm_90. None: the GPU's own, or ``fallback_arch``
    when there is no GPU. The CUDARL_CUDA_ARCH environment variable overrides it."""

    fallback_arch: str = Field(default="90", pattern=_ARCH)
    """Architecture used when no GPU is present and ``arch`` is unset (compile-only runs)."""

    timeout_s: float = Field(default=300.0, gt=0, le=86400)
    """Wall-clock limit for one candidate's build; the build's process group is killed after it."""

    jobs: int = Field(default=2, ge=1, le=256)
    """Parallel compiler jobs inside one extension build (MAX_JOBS for ninja): main.cpp and cuda.cu side by side."""

    nice: int = Field(default=0, ge=0, le=19)
    """CPU priority of build processes (``nice``, applied to the build's process and, where the
    kernel schedules sessions as groups, its session; the compilers inherit it). Builds are
    throughput work, while a judge holding a GPU turn is on every other judge's path. Off (0) by
    default: the build's time limit is wall time, so niced builds could be pushed past it by
    candidates spinning the CPU in their judges, and a gain was not measured (benchmarks/README.md)."""

    trim_includes: bool = True
    """Inline candidates: build the CUDA file with a header holding only the part of
    ``<torch/extension.h>`` it uses (tensor class, the operators it names); if that fails, the
    source as written is built and its errors reported (``cudarl.tester.build.inline_fast``)."""

    precompiled_header: bool = True
    """Inline candidates: precompile ``torch/extension.h`` once per machine (``<cache>/pch``)
    for the bindings file. GCC ignores it when flags differ, so it costs speed, never results."""

    pch_dir: Path | None = None
    """Folder of the precompiled header (None: ``<cache>/pch``); caches naming one build it once."""

    warm_children: int = Field(default=1, ge=0, le=64)
    """Inline candidates: compile children kept started with torch already imported, so that a
    build does not wait for the import (``sandbox.WarmChildren``); 0 starts each child cold."""

    split_nvcc: bool = True
    """Inline candidates: run nvcc's host and device front ends side by side (the same commands
    as nvcc's own, ``cudarl.tester.build.nvcc_split``); plain nvcc where the plan is not the expected
    one, or when ``PYTORCH_NVCC`` is set already."""

    extra_cuda_cflags: tuple[str, ...] = ("-O3",)
    """Flags added to every CUDA compile (the candidate's own flags come after these)."""

    cache_dir: Path | None = None
    """Compile cache root. None: CUDARL_CACHE_DIR, else ~/.cache/cudarl."""

    error_lines: int = Field(default=40, ge=1, le=10000)
    """Compile errors are trimmed to this many lines for the verdict (and the optimizer)."""


class SandboxConfig(_Section):
    timeout_s: float = Field(default=180.0, gt=0, le=86400)
    """Wall-clock limit for running one candidate (load, correctness and timing together).
    It includes importing torch and creating the CUDA context in a fresh process."""

    memory_limit_mb: int = Field(default=16384, ge=256)
    """Resident memory limit of the child (its whole process group), enforced by a watchdog."""

    gpu_memory_fraction: float = Field(default=0.5, gt=0, le=1)
    """Share of the GPU's memory the child's torch allocator may take."""

    file_size_limit_mb: int = Field(default=64, ge=1)
    """Largest file the child may write (RLIMIT_FSIZE)."""

    output_limit_kb: int = Field(default=16, ge=1)
    """How much of the child's stdout and stderr each is kept in the verdict."""

    isolate_network: bool = True
    """Run the child in a network namespace of its own (no network); where the OS refuses, the verdict says so."""

    isolate_pids: bool = True
    """Keep every process the candidate starts (setsid, double fork) under the tester's child, which
    adopts them as a subreaper and kills them all when it finishes."""

    warm_judges: int | None = Field(default=None, ge=0, le=64)
    """Judges kept started ahead of their candidates, each with its runner, torch and a CUDA context up
    (``sandbox.WarmChildren``), so that a candidate does not wait seconds for them. None: 2 where the
    tester has a GPU, 0 without one (spare processes would only take CPU there). Limits apply from the job on."""

    load_only_judges: bool = True
    """Without a GPU (compile-only verdicts): judges that never import torch, the runner builds the reference
    first (``judging.judge.run_load_only``): half a verdict's CPU. False: the judge builds it itself."""

    restrict_writes: bool = True
    """Builds and runs write only into the candidate's folder and its build folder (Landlock,
    Linux 5.13+; ``sandbox.write_guard``): its code cannot change files elsewhere (notes say so)."""

    max_processes: int = Field(default=64, ge=4)
    """Most processes the child's group may hold (compilers included); above it the group is
    killed and the verdict is ``resource_limit``. Root ignores RLIMIT_NPROC, so this is a watchdog."""

    backend: Literal["namespace", "docker"] = "namespace"
    """Where builds run: "namespace", a child process with its own limits and namespaces; or
    "docker", a container per build (``sandbox.docker_backend``: no network, read-only root, the
    build's folders the only writable ones, memory / PID / CPU limits, no capabilities, not root).
    The judge and runner stay child processes either way (a GPU in a container needs NVIDIA's
    container toolkit: not done)."""


class CorrectnessConfig(_Section):
    trials: int = Field(default=5, ge=1, le=1000)
    """Number of fresh random inputs each candidate is checked on (at least 5)."""

    hidden_trials: int = Field(default=2, ge=0, le=1000)
    """Extra trials on the task's hidden shape set (when it has one), after the regular ones."""

    fp32_tolerance: float = Field(default=1e-4, gt=0, le=1)
    """Default atol and rtol for float32 outputs (a task may override)."""

    half_tolerance: float = Field(default=1e-2, gt=0, le=1)
    """Default atol and rtol for float16 and bfloat16 outputs (a task may override)."""


class TimingConfig(_Section):
    enabled: bool = True
    """Time correct candidates and the reference. Off: verdicts stop after correctness."""

    warmup_runs: int = Field(default=5, ge=0)
    """Fewest untimed runs before measuring (module load, autotuning, allocator growth)."""

    warmup_s: float = Field(default=1.0, ge=0)
    """Warm-up also lasts at least this long: a fresh process finds the GPU idle and its state
    takes a while to settle. Measured on an H200 (benchmarks/timing_stability.py): a 0.37 ms
    matmul's median spread across five fresh processes was 7% after 0.3 s of warm-up and 0.5%
    after 1 s."""

    min_runs: int = Field(default=20, ge=1)
    """Fewest timed runs before the spread may end the measurement."""

    max_runs: int = Field(default=1000, ge=1)
    """Most timed runs per model."""

    target_rse: float = Field(default=0.01, ge=0, lt=1)
    """Stop once the relative standard error of the mean is below this."""

    budget_s: float = Field(default=5.0, gt=0)
    """Time budget per model; measurement ends when it is spent even if the spread is high."""

    gpu_turns: Literal["timing", "whole", "off"] = "timing"
    """How judges sharing a GPU (``pool.bench_slots``, GPU fractions) take turns, through a file
    lock per GPU (``cudarl.tester.judging.gpu_turns``). ``timing``: timed runs have the GPU to
    themselves, correctness trials of several candidates may overlap. ``whole``: each judge has
    the GPU alone from just after creating its CUDA context to its exit (only start-up overlaps,
    and no other candidate's code is loaded meanwhile; strictest, slower).
    ``off``: no turns (timings of candidates judged at once disturb each other)."""

    gpu_turn_wait_s: float = Field(default=600.0, gt=0)
    """Most time a judge may wait for its turns on the GPU. Waiting does not count against
    ``sandbox.timeout_s`` (neighbours holding the GPU are not the candidate's fault); past this
    the verdict is ``harness_error`` (not cached by the pool), never the candidate's timeout."""

    reference_reuse_s: float = Field(default=600.0, ge=0)
    """How long (seconds) a task's reference timing is reused by later judges of the same tester
    (one GPU). The reference is timed once per task in a process of its own that never runs
    candidate code, in an exclusive GPU turn; judges of the task in flight at the same time
    share that one measurement (``cudarl.tester.judging.reference_timing``). 0: share only among
    judges in flight together. Verdicts say how old the timing was."""

    @model_validator(mode="after")
    def _runs_ordered(self) -> Self:
        if self.min_runs > self.max_runs:
            raise ValueError(f"min_runs ({self.min_runs}) is above max_runs ({self.max_runs})")
        return self


class HardeningConfig(_Section):
    static_rules: bool = True
    """Run the static AST and CUDA-source rules (``cudarl.tester.build.static_rules``) before compiling.
    Turn off only to see what the runtime defenses catch on their own."""

    own_kernel_check: bool = True
    """Profile one forward and require the candidate's own kernels to do the work. The runner starts
    the profiler before its first request (3 s on an H200, mostly hidden behind the judge's start)."""

    own_kernel_min_share: float = Field(default=0.5, ge=0, le=1)
    """Fallback only: the least share of forward's GPU time in the candidate's own kernels when
    whether the output depends on them cannot be observed (``judging.knockout``; e.g. ops called
    through ``torch.ops``, driver-API launches). Where it can, that decides (``[torch-work]`` for a decoy)."""

    poison_memory: bool = True
    """Fill freed GPU memory with NaN bytes before each checked call (stale-result tricks)."""

    fresh_timing_inputs: bool = True
    """Give every timed call freshly generated inputs (untimed), for the reference and the
    candidate alike, so caches keyed on pointers, shapes or contents never hit."""

    reset_persisting_l2: bool = True
    """Clear persisting-L2 lines before each timed call's flush."""

    side_stream_share: float = Field(default=0.1, ge=0, le=1)
    """Largest share of timed runs whose work was still running after the host had seen the
    call's stream end (a few can be host hiccups); above it the candidate is rejected
    (``[side-stream]``)."""

    drop_capabilities: bool = True
    """The candidate's process gives up root's capabilities once CUDA is up, so it cannot reach
    the judge's memory or descriptors through /proc."""


class TesterConfig(_Section):
    compile: CompileConfig = Field(default_factory=CompileConfig)
    """Compile stage."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Child process limits."""
    correctness: CorrectnessConfig = Field(default_factory=CorrectnessConfig)
    """Correctness stage."""
    timing: TimingConfig = Field(default_factory=TimingConfig)
    """Timing stage."""
    hardening: HardeningConfig = Field(default_factory=HardeningConfig)
    """Defenses against reward hacking."""


class CurriculumConfig(_Section):
    tiers: tuple[str, ...] = Field(default=("easy", "medium", "hard"), min_length=1)
    """Tiers from first to last; tasks of other tiers are never sampled."""

    window: int = Field(default=64, ge=1)
    """Rolling window of results (of the current tier's tasks) that the gates are computed on;
    no promotion before it is full."""

    compile_rate_gate: float = Field(default=0.9, ge=0, le=1)
    """Promote only when the share of candidates that compiled is above this."""

    pass_rate_gate: float = Field(default=0.75, ge=0, le=1)
    """Promote only when the share of candidates judged correct is above this."""

    speedup_gate: float | None = Field(default=None, gt=0)
    """If set, promote only when the mean speedup of the correct candidates is above this."""

    replay_fraction: float = Field(default=0.2, ge=0, le=1)
    """Share of samples drawn from earlier tiers (so earlier skills are not forgotten)."""

    demotion: bool = False
    """Move back one tier when the pass rate of a full window falls below ``demotion_pass_rate``."""

    demotion_pass_rate: float = Field(default=0.2, ge=0, le=1)
    """The pass rate under which a full window demotes (when ``demotion`` is on)."""

    seed: int = 0
    """Seed of the sampler (its state is saved by ``state_dict``)."""

    @model_validator(mode="after")
    def _tiers_distinct(self) -> Self:
        if len(set(self.tiers)) != len(self.tiers):
            raise ValueError(f"tiers repeat a name: {list(self.tiers)}")
        return self


class PoolConfig(_Section):
    name: str = Field(default="cudarl-tester", min_length=1)
    """Name of the ``TesterPool`` actor; clients find a running pool by it."""
    namespace: str = Field(default="cudarl", min_length=1)
    """Ray namespace the pool's actor is registered in."""
    detached: bool = False
    """Keep the pool alive after the process that started it exits (``cudarl tester serve --detach``)."""
    min_compile_workers: int = Field(default=1, ge=0)
    """Compile workers kept even when idle."""
    max_compile_workers: int = Field(default=0, ge=0)
    """Upper bound on compile workers; 0: one per CPU of the cluster left after the bench workers."""
    compile_worker_cpus: float = Field(default=1.0, gt=0)
    """CPUs reserved per compile worker (a build runs two front ends at once, so 1 slightly
    oversubscribes, which keeps the cores busy while a build waits on its linker)."""
    min_bench_workers: int = Field(default=1, ge=0)
    """Bench workers kept even when idle."""
    max_bench_workers: int = Field(default=0, ge=0)
    """Upper bound on bench workers; 0: one per ``gpus_per_bench_worker`` of the cluster's GPUs,
    so GPU nodes that join add bench workers (``bench_workers_without_gpu`` when it has none)."""
    gpus_per_bench_worker: float = Field(default=1.0, gt=0, le=1)
    """GPU share of a bench worker (1: pinned to a whole GPU; 0.5: two per GPU, timings then
    share the GPU and are noisier)."""
    bench_workers_without_gpu: int = Field(default=1, ge=0)
    """Bench workers on a cluster without GPUs: they run the load stage only and say so."""
    bench_slots: int = Field(default=2, ge=1)
    """Candidates a bench worker runs at once. They take turns on the GPU (``timing.gpu_turns``):
    start-up and correctness trials overlap, timed runs do not. Each process's GPU memory share
    (``sandbox.gpu_memory_fraction``) is divided among the slots unless turns are ``whole``.
    Measured on one H200 (benchmarks/README.md, inline candidates): 370/h with 2 slots, 444-584/h
    with 4, 702/h with 8 (the last on a newer judge). Raise it where the GPU's memory allows."""
    scale_up_queue_depth: int = Field(default=2, ge=1)
    """Add a worker of a kind when its queue holds more than this many items per worker."""
    idle_s: float = Field(default=60.0, gt=0)
    """Remove a worker (down to the minimum) after it has been idle this long."""
    scale_interval_s: float = Field(default=1.0, gt=0)
    """How often the pool reconsiders its size and checks the cluster for new GPUs."""
    max_queued: int = Field(default=4096, ge=1)
    """Items accepted and not yet judged; further submissions wait for room (backpressure)."""
    deadline_grace_s: float = Field(default=120.0, gt=0)
    """Added to the compile and sandbox time limits to give each stage's hard deadline on the
    pool side: a worker that has not answered by then is killed and the item gets ``timeout``."""
    item_deadline_s: float = Field(default=3600.0, gt=0)
    """Hard limit from submission to verdict, queueing included; the caller gets ``timeout``."""
    retries: int = Field(default=1, ge=0)
    """Times an item is re-run after its worker died under it (killed, node lost)."""
    verdict_cache_size: int = Field(default=20000, ge=0)
    """Verdicts kept for identical (task, source) pairs; 0 disables sharing judged verdicts
    (identical items in flight still share one)."""


class CudarlConfig(_Section):
    tester: TesterConfig = Field(default_factory=TesterConfig)
    """How candidates are judged."""
    pool: PoolConfig = Field(default_factory=PoolConfig)
    """The tester as Ray actors: compile and bench workers, scaling, deadlines."""
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    """Which tasks training sees, and when it moves on."""
    sft: SftConfig = Field(default_factory=SftConfig)
    """The warm start: supervised fine-tuning of both roles' adapters."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """What a judged candidate earns (``cudarl.reward``)."""
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    """Returns, advantages and the policy loss of the RL phase (``cudarl.rl``)."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    """The RL run: model, batch shape, episodes, update workers (``cudarl train``)."""
    serve: ServeConfig = Field(default_factory=ServeConfig)
    """The service: agent versions, their A/B split, request limits (``cudarl serve``)."""


def load_config(path: Path | str | None = None) -> CudarlConfig:
    """Load settings from a TOML file (None: all defaults)."""
    if path is None:
        return CudarlConfig()
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(read_text(path, ConfigError, "TOML file"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return CudarlConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from exc


def describe_defaults(config: BaseModel, prefix: str = "") -> str:
    """The config as commented TOML: every setting, its default and its docstring."""
    scalars, sections = [], []
    for name, field in type(config).model_fields.items():
        value = getattr(config, name)
        if isinstance(value, BaseModel):
            sections.append(describe_defaults(value, f"{prefix}{name}."))
            continue
        doc = " ".join((field.description or "").split())
        shown = "# (unset)" if value is None else _toml_value(value)
        scalars.append(f"# {doc}\n{name} = {shown}" if value is not None else f"# {doc}\n# {name} = (unset)")
    header = [f"[{prefix.rstrip('.')}]"] if prefix and scalars else []
    return "\n\n".join(["\n".join(header + scalars)] * bool(scalars) + sections).strip()


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table
        return "{" + ", ".join(f"{_toml_value(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = ["ConfigError", "CudarlConfig", "SftConfig", "load_config", "describe_defaults"]
