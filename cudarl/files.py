"""Writing files so that a reader never sees half of one, and locking across processes."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path`` (atomic on POSIX):
    a killed writer leaves the previous file, and concurrent writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def write_text_atomic(path: Path, text: str) -> None:
    """``write_bytes_atomic`` for text (UTF-8)."""
    write_bytes_atomic(path, text.encode())


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if missing), held for the ``with`` block: processes
    that share a folder (the compile cache, cubins, the precompiled header) build one thing once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
