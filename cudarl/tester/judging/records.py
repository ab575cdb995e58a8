"""The typed hand-offs of a judgement: the tester's job for the judge (``JudgeJob``) and the
judge's requests to the runner (``LoadRequest``, ``TrialRequest``, ``RebuildRequest``,
``TimeRequest``, ``PatchedRequest``). Each crosses a pipe as JSON (``to_wire``) and is rebuilt
on the other side (``from_wire``), which rejects unknown or missing fields: a renamed field
fails on its first use instead of reading as a silent default. Plain dataclasses (no torch, no
pydantic): the runner imports this before the candidate exists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

_Record = TypeVar("_Record")


class WireError(ValueError):
    """A message whose fields do not match its record (unknown, missing, or of the wrong op)."""


class _Wire:
    def __post_init__(self) -> None:
        # JSON has no tuples: a tuple field arrives as a list and is made a tuple again.
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if isinstance(value, list) and str(item.type).startswith("tuple"):
                object.__setattr__(self, item.name, tuple(value))

    def to_wire(self) -> dict:
        """The record as a JSON-ready dict (lists for tuples)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_wire(cls: type[_Record], message: dict, ignore: tuple[str, ...] = ()) -> _Record:
        """The record from a dict; ``ignore`` names fields of the envelope (op, nonce, stage)."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        fields = {k: v for k, v in message.items() if k not in ignore}
        unknown = sorted(set(fields) - names)
        if unknown:
            raise WireError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
        try:
            return cls(**fields)
        except TypeError as exc:
            raise WireError(f"{cls.__name__}: {exc}") from exc


@dataclass(frozen=True)
class JudgeJob(_Wire):
    """Everything a judge needs, read from stdin (the sandbox adds ``key``, ``cwd``, ``limits``).
    Built by ``cudarl.tester.tester.judge_job`` from the tester's settings."""

    task_path: str
    """The task's reference source (``reference.py`` in the judgement's folder)."""
    candidate_path: str
    """The candidate's source; unused by a ``reference_only`` job."""
    build_root: str
    """The compile cache entry's build folder the runner loads the candidate's build from."""
    arch: str
    """The target architecture the build was made for (``90``)."""
    cuda_cflags: tuple[str, ...]
    """The nvcc flags of the build (the runner's load hook must match the compile's)."""
    jobs: int
    """Build parallelism, should the runner have to build (it should not)."""
    seed: int
    """The secret seed every trial seed and timing seed is drawn from."""
    trials: int
    """Correctness trials at the default shapes."""
    atol: float
    rtol: float
    gpu_memory_fraction: float
    """The share of GPU memory each of the judge's and the runner's processes may use."""
    hidden: dict[str, Any]
    """Module constants of the hidden shape set (empty: none)."""
    hidden_trials: int
    timing: dict[str, Any]
    """``TimingConfig`` as a dict (``timing_config()`` rebuilds it)."""
    kernel_names: tuple[str, ...]
    """The candidate's own kernels (the own-kernel check matches launches against them)."""
    own_kernel_check: bool
    own_kernel_min_share: float
    side_stream_share: float
    poison_memory: bool
    fresh_timing_inputs: bool
    reset_persisting_l2: bool
    drop_capabilities: bool
    isolate_pids: bool
    restrict_writes: bool = False
    """The runner writes only into the candidate's folder and its build folder (Landlock)."""
    cpu_correctness: bool = False
    """Run correctness without a GPU (pure-PyTorch candidates, tests)."""
    load_only: bool = False
    """No GPU and no CPU correctness: the verdict is only whether the candidate loads, and the
    judge never imports torch (``judge.run_load_only``: the runner builds the reference first)."""
    inline_fast: dict[str, Any] | None = None
    """The fast-inline settings the compile used (``Tester.inline_fast``)."""
    gpu_lock: str | None = None
    """The file behind the judges' turns on this GPU (``timing.gpu_turns``); None: no turns."""
    reference_only: bool = False
    """Time the task's reference and nothing else (no runner, no candidate code)."""
    reference_ready: str | None = None
    """A file the tester creates once the task's reference timing ended; the candidate is
    loaded only after it exists."""

    def timing_config(self):
        """The timing settings as ``cudarl.config.TimingConfig``."""
        from cudarl.config import TimingConfig

        return TimingConfig(**self.timing)

    def with_changes(self, **changes: Any) -> JudgeJob:
        return dataclasses.replace(self, **changes)


_ENVELOPE = ("op", "nonce", "stage", "blobs")  # the frame's fields, not the request's


@dataclass(frozen=True)
class ReferenceRequest(_Wire):
    """Load-only judging: import the task's reference and build its ``Model`` (then drop it),
    before any candidate code runs in the runner, so that the answer can still be trusted."""

    op: ClassVar[str] = "reference"
    task_path: str
    init_seed: int


@dataclass(frozen=True)
class LoadRequest(_Wire):
    """Import the candidate (after CUDA is up and capabilities are dropped) and build ``ModelNew``."""

    op: ClassVar[str] = "load"
    task_path: str
    candidate_path: str
    build_root: str
    arch: str
    cuda_cflags: tuple[str, ...]
    jobs: int
    init_seed: int
    gpu_memory_fraction: float
    drop_capabilities: bool
    inline_fast: dict[str, Any] | None = None
    restrict_writes: bool = False


@dataclass(frozen=True)
class TrialRequest(_Wire):
    """One correctness trial: inputs from ``seed``; ``profile``: report the kernels launched."""

    op: ClassVar[str] = "trial"
    seed: int
    profile: bool = False
    poison: bool = True


@dataclass(frozen=True)
class RebuildRequest(_Wire):
    """Rebuild ``ModelNew`` at another shape set (the task's module constants)."""

    op: ClassVar[str] = "rebuild"
    constants: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TimeRequest(_Wire):
    """Time forward: fresh inputs from ``base_seed + k`` per call; two outputs kept for rechecks."""

    op: ClassVar[str] = "time"
    base_seed: int
    timing: dict[str, Any]
    pick_seed: int
    fresh_inputs: bool = True
    reset_l2: bool = True


@dataclass(frozen=True)
class PatchedRequest(_Wire):
    """Report harness and torch functions the candidate replaced."""

    op: ClassVar[str] = "patched"


RunnerRequest = ReferenceRequest | LoadRequest | TrialRequest | RebuildRequest | TimeRequest | PatchedRequest
REQUESTS: dict[str, type] = {r.op: r for r in (ReferenceRequest, LoadRequest, TrialRequest, RebuildRequest,
                                               TimeRequest, PatchedRequest)}


def request_from_wire(message: dict) -> RunnerRequest:
    """The runner's side: the typed request a frame carries (``WireError`` for anything else)."""
    kind = REQUESTS.get(str(message.get("op")))
    if kind is None:
        raise WireError(f"unknown request {message.get('op')!r}")
    return kind.from_wire(message, ignore=_ENVELOPE)
