"""A build as an *artifact*: the compile cache entry's files packed into bytes (object files left
out), so that a candidate built on one machine (a CPU-only compile worker) is judged on another
(a GPU bench worker): ``Tester.judge`` installs it into that machine's cache under the entry's
lock. On one machine the cache is shared and nothing is unpacked.

Covered: artifacts are packed from regular files only (links a candidate's build planted are left
out) and unpacked with tarfile's ``data`` filter (no absolute paths, no escapes, no devices); a
digest from the packer is checked (tar reads an archive cut between members as complete).
Not covered: artifacts are not signed; they travel only between the pool's own workers.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tempfile
from pathlib import Path

from cudarl.tester.build.compile import CompileCache, CompileOutcome
from cudarl.tester.verdict import CompileReport

ARTIFACT_LIMIT_BYTES = 1 << 30  # a build folder beyond this is not shipped (the compile limits keep them far smaller)
_LEFT_OUT_SUFFIXES = (".o", ".lock")


class ArtifactError(RuntimeError):
    """An artifact that cannot be packed or installed (too large, damaged); a harness fault."""


def installed(cache: CompileCache, key: str) -> bool:
    """Whether this machine's cache holds a finished, successful build for ``key``."""
    found = cache.lookup(key)
    return found is not None and found.ok


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


def install_artifact(cache: CompileCache, key: str, data: bytes, report: CompileReport,
                     sha256: str | None = None) -> None:
    """Unpack an artifact as the cache entry ``key`` (under its lock; a finished entry is kept).
    ``sha256`` is the packer's digest: tar reads an archive cut between two members as complete.
    The compile report (``report``) is written last, so a half-unpacked entry never looks done."""
    with cache.locked(key):
        if installed(cache, key):
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
        cache.store(key, CompileOutcome(report=report, ok=True))
