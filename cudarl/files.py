"""Files: reading input text with a clear error, writing so that a reader never sees half of
one, locking across processes, and executing a source file as a module (tasks and candidates
are source files)."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path`` (atomic on POSIX):
    a killed writer leaves the previous file, and concurrent writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def read_text(path: Path, error: type[Exception], kind: str = "file") -> str:
    """A UTF-8 text file, or ``error`` with a one-line reason naming it (a folder given for a
    ``kind`` of file, not UTF-8, unreadable): an input file must give a clear message, never a
    traceback."""
    try:
        return path.read_text(encoding="utf-8")
    except IsADirectoryError as exc:
        raise error(f"{path}: is a folder, not a {kind}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from exc


class ReportError(OSError):
    """A report could not be written (the message names the path and why)."""


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


def import_source(path: Path, module_name: str) -> ModuleType:
    """Execute a source file as a fresh module (tracebacks show its real lines)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def check_writable(path: Path) -> None:
    """Refuse an ``--out`` that cannot be written before any work is done."""
    if path.is_dir():
        raise ReportError(f"cannot write the report to {path}: it is a folder")
    existing = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK) or \
            (path.exists() and not os.access(path, os.W_OK)):
        raise ReportError(f"cannot write the report to {path}: no write permission")
