"""The tester cut in two, so that the halves can run in different processes or on different machines.

``compile_stage`` (guard and compile) needs only CPUs, nvcc and, for inline candidates, a
CUDA-enabled torch; ``bench_stage`` (load, correctness, timing, in the sandboxed child) needs the
GPU. Between them travel a small ``Compiled`` record and the build as an *artifact*: the cache
entry's files packed into bytes (object files left out), which the bench side unpacks into its own
compile cache under the entry's lock. On one machine the cache is shared and the artifact is never
unpacked: the bench side finds the entry already there.

Covered: artifacts are packed from regular files only (links a candidate's build planted are left
out) and unpacked with tarfile's ``data`` filter (no absolute paths, no escapes, no devices).
Not covered: artifacts are not signed; they travel only between the pool's own workers.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cudarl.config import TesterConfig
from cudarl.tasks.task import Task
from cudarl.tester.candidate import Candidate
from cudarl.tester.compile import CompileCache, CompileOutcome
from cudarl.tester.tester import Prepared, Tester
from cudarl.tester.verdict import Verdict

ARTIFACT_LIMIT_BYTES = 1 << 30  # a build folder beyond this is not shipped (the compile limits keep them far smaller)
_LEFT_OUT_SUFFIXES = (".o", ".lock")


class ArtifactError(RuntimeError):
    """An artifact that cannot be packed or installed (too large, damaged); a harness fault."""


@dataclass
class Compiled:
    """What the compile stage hands the bench stage. ``ready`` is False when the verdict is
    already final (guard refusal, compile error): the bench stage then returns it unchanged."""

    verdict: Verdict
    ready: bool
    kernel_names: list[str] = field(default_factory=list)
    artifact_bytes: int = 0
    artifact_sha256: str = ""  # checked on install: a tar cut between members reads as complete

    @property
    def cache_key(self) -> str | None:
        return self.verdict.compile.cache_key if self.verdict.compile else None


def compile_stage(tester: Tester, task: Task, candidate: Candidate) -> tuple[Compiled, bytes | None]:
    """Guard and compile; returns the record and the artifact (None when there is nothing to run)."""
    prepared = tester.prepare(task, candidate)
    if prepared.workdir is not None:
        shutil.rmtree(prepared.workdir, ignore_errors=True)  # the bench side writes its own
    if prepared.compiled is None or not prepared.compiled.ok:
        return Compiled(prepared.verdict, ready=False), None
    key = prepared.compiled.report.cache_key
    data = pack_artifact(tester.cache.entry(key))
    return (Compiled(prepared.verdict, True, list(prepared.kernel_names or []), len(data),
                     hashlib.sha256(data).hexdigest()), data)


def bench_stage(tester: Tester, task: Task, candidate: Candidate, compiled: Compiled,
                artifact: Callable[[], bytes]) -> Verdict:
    """Load, check and time a compiled candidate. ``artifact`` is called only when this machine's
    cache lacks the build (the compile ran elsewhere); it may raise for a lost artifact."""
    verdict = compiled.verdict.model_copy(deep=True)
    if not compiled.ready or verdict.compile is None:
        return verdict
    key = verdict.compile.cache_key
    started = time.monotonic()
    if not _installed(tester.cache, key):
        install_artifact(tester.cache, key, artifact(), verdict, compiled.artifact_sha256 or None)
        verdict.stage_seconds["artifact"] = time.monotonic() - started
    tester.scratch.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="eval-", dir=tester.scratch))
    (workdir / "candidate.py").write_text(candidate.source)
    (workdir / "reference.py").write_text(task.source)
    prepared = Prepared(task, verdict, CompileOutcome(report=verdict.compile, ok=True), workdir,
                        compiled.kernel_names)
    return tester.run(prepared)  # removes the workdir


def pack_artifact(entry: Path) -> bytes:
    """The cache entry's regular files as an uncompressed tar (compressing costs more CPU than the
    object store saves on one machine); object files and locks are left out."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(entry.rglob("*")):
            if path.is_symlink() or not path.is_file() or path.name.endswith(_LEFT_OUT_SUFFIXES):
                continue
            total += path.stat().st_size
            if total > ARTIFACT_LIMIT_BYTES:
                raise ArtifactError(f"build folder {entry} is over {ARTIFACT_LIMIT_BYTES >> 20} MB")
            archive.add(path, arcname=str(path.relative_to(entry)), recursive=False)
    return buffer.getvalue()


def install_artifact(cache: CompileCache, key: str, data: bytes, verdict: Verdict, sha256: str | None = None) -> None:
    """Unpack an artifact as the cache entry ``key`` (under its lock; a finished entry is kept).
    ``sha256`` is the packer's digest: tar reads an archive cut between two members as complete.
    The compile report is written from the verdict, last, so a half-unpacked entry never looks done."""
    with cache.locked(key):
        if _installed(cache, key):
            return
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise ArtifactError(f"artifact for {key} is damaged: {len(data)} bytes do not match the packer's digest")
        entry = cache.entry(key)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache.root))
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
                archive.extractall(staging, filter="data")
        except (tarfile.TarError, OSError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ArtifactError(f"artifact for {key} is damaged: {exc}") from exc
        (staging / "report.json").unlink(missing_ok=True)
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
        assert verdict.compile is not None
        cache.store(key, CompileOutcome(report=verdict.compile, ok=True))


def _installed(cache: CompileCache, key: str) -> bool:
    found = cache.lookup(key)
    return found is not None and found.ok


def judgement_key(task: Task, candidate: Candidate) -> str:
    """Identical candidates of one task share a verdict: the key hashes the whole task (a task
    whose reference or shapes changed is another task) and the candidate's source, not its id."""
    return hashlib.sha256(f"{task.model_dump_json()}\0{candidate.source_hash}".encode()).hexdigest()[:32]


def builder_config(config: TesterConfig, profile: dict | None) -> TesterConfig:
    """The tester settings of a compile worker: the bench workers' compile mode and architecture
    (``profile``, from a bench worker) replace auto-detection, which on a CPU-only node would pick
    kernel mode and the fallback arch, and builds would not load on the GPU."""
    if not profile:
        return config
    return config.model_copy(update={"compile": config.compile.model_copy(
        update={"mode": profile["mode"], "arch": profile["arch"]})})


def bench_config(config: TesterConfig, slots: int, gpu_share: float) -> TesterConfig:
    """The tester settings of a bench worker with ``slots`` candidates at once on ``gpu_share`` of
    a GPU. Unless judges take whole turns (``timing.gpu_turns = "whole"``), the correctness
    trials of several candidates share the GPU, so each process's memory share is divided among
    them: a candidate that allocates all it may cannot starve a neighbour's honest one."""
    if config.timing.gpu_turns == "whole" or (slots == 1 and gpu_share >= 1.0):
        return config
    fraction = config.sandbox.gpu_memory_fraction * min(gpu_share, 1.0) / slots
    return config.model_copy(update={"sandbox": config.sandbox.model_copy(update={"gpu_memory_fraction": fraction})})
