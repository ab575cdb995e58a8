"""``Built``: what ``Tester.build`` (guard and compile) hands ``Tester.judge`` (load, correctness,
timing), in one process or across machines (the pool's compile and bench workers).

The build itself is not in the record: it lives in the compile cache under ``cache_key``, and
travels between machines as an artifact (``cudarl.tester.build.artifact``) whose size and digest
the record carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cudarl.tester.verdict import Verdict


@dataclass(frozen=True)
class Built:
    """A candidate after guard and compile. ``ready`` is False when the verdict is already final
    (guard refusal, compile error, a build this machine cannot make): ``judge`` returns it as is."""

    verdict: Verdict
    """The verdict so far: guard and compile figures, and the final outcome when not ``ready``."""
    ready: bool
    kernel_names: tuple[str, ...] = field(default_factory=tuple)
    """The candidate's own kernels (from the source and the compiler's report)."""
    artifact_bytes: int = 0
    """Size of the packed build when it was packed to travel (0: it did not)."""
    artifact_sha256: str = ""
    """The packer's digest, checked on install."""

    @property
    def cache_key(self) -> str | None:
        return self.verdict.compile.cache_key if self.verdict.compile else None

    def with_artifact(self, size: int, sha256: str) -> Built:
        return replace(self, artifact_bytes=size, artifact_sha256=sha256)
