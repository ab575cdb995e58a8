"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path`` (atomic on POSIX):
    a killed writer leaves the previous file, and concurrent writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    temporary.replace(path)
