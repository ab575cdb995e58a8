"""What every sandboxed child entry does (the compile child, the judge), on the child's side.

``start_child`` is the common start: read ``--result-fd`` (or ``--result-socket``, in a
container) and, for a warm child (started by ``sandbox.parent.WarmChildren`` before its job
exists), ``--warm LIMITS_JSON``; apply the limits
(first: unsharing the network namespace needs a single-threaded process); let the entry import
what it needs while no job exists yet; then read the job from stdin, check that a warm child's
job carries the limits it applied, change to the job's folder and send ``hello``. The error
helpers (``describe_exception``, ``classify``) are shared by the children and the runner.
Nothing here imports torch at module level.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cudarl.tester.sandbox.channel import ResultWriter

_CUDA_ERROR_MARKERS = (
    "CUDA error", "cudaError", "illegal memory access", "unspecified launch failure",
    "device-side assert", "CUDA_ERROR", "misaligned address", "an illegal instruction",
    "CUBLAS_STATUS", "launch timed out",
)


def describe_exception(exc: BaseException, limit: int = 3000) -> str:
    """A readable, trimmed traceback: the candidate's frames and the error line."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines)
    if len(text) > limit:
        text = text[:limit // 3] + "\n[...]\n" + text[-(2 * limit) // 3:]
    return text.strip()


def file_too_large(exc: BaseException) -> bool:
    """A write past RLIMIT_FSIZE (Python ignores SIGXFSZ, so the write fails with EFBIG)."""
    return isinstance(exc, OSError) and exc.errno == errno.EFBIG


def classify(exc: BaseException, stage: str) -> str:
    """The outcome a candidate's exception earns (``memory_limit``, ``cuda_error``, ...)."""
    import torch

    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in message:
        return "memory_limit"
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if (accelerator_error and isinstance(exc, accelerator_error)) or any(m in message for m in _CUDA_ERROR_MARKERS):
        return "cuda_error"
    if isinstance(exc, SystemExit):
        return "crashed"
    if file_too_large(exc):
        return "resource_limit"
    return "load_error" if stage == "load" else "runtime_error"


def _connect(path: str) -> int:
    """A descriptor of a connection to the parent's Unix socket (the container's result pipe)."""
    import socket

    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    descriptor = os.dup(connection.fileno())
    connection.close()
    return descriptor


@dataclass
class ChildStart:
    """A started child: its signed result pipe, its job (``None`` when a warm child's pool closed
    before sending one), what applying its limits did, and what the entry's warm-up returned."""

    results: ResultWriter
    job: dict | None
    applied: dict
    warmed: Any = None
    warm: bool = False


def start_child(description: str, apply: Callable[[dict], dict],
                warm_up: Callable[[argparse.Namespace], Any] | None = None,
                add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
                failed_stage: str = "load") -> ChildStart:
    """The common start of a child entry (see the module docstring). ``apply`` applies a limits
    dict and returns what it did; ``warm_up`` (a warm child only; its argument is the parsed
    command line, with ``warm_limits``) imports and starts what the entry needs before the job;
    ``add_arguments`` adds the entry's own flags. A job whose
    limits differ from the ones a warm child applied ends the child with ``harness_error`` at
    ``failed_stage``. The job's ``key`` (hex), when present, signs the results from then on."""
    parser = argparse.ArgumentParser(description=description)
    channel = parser.add_mutually_exclusive_group(required=True)
    channel.add_argument("--result-fd", type=int, help="the result pipe's descriptor (a child process)")
    channel.add_argument("--result-socket", help="a Unix socket to send results over (a container's child)")
    parser.add_argument("--warm", default=None, metavar="LIMITS_JSON",
                        help="apply these limits and start up before the job arrives (WarmChildren)")
    if add_arguments is not None:
        add_arguments(parser)
    arguments = parser.parse_args()
    results = ResultWriter(arguments.result_fd if arguments.result_socket is None
                           else _connect(arguments.result_socket))
    warm_limits = json.loads(arguments.warm) if arguments.warm else None
    applied: dict | None = None
    warmed = None
    if warm_limits is not None:
        applied = apply(warm_limits)
        arguments.warm_limits = warm_limits
        warmed = warm_up(arguments) if warm_up is not None else None
    raw = sys.stdin.read()
    sys.stdin.close()
    if not raw.strip():
        return ChildStart(results, None, applied or {}, warmed, warm_limits is not None)
    job = json.loads(raw)
    if job.get("key"):
        results.key = bytes.fromhex(job.pop("key"))
    if job.get("cwd"):
        os.chdir(job["cwd"])
    if applied is None:
        applied = apply(job["limits"])
    elif job["limits"] != warm_limits:
        results.finish("harness_error", failed_stage, ["a warm child got a job with other limits than it applied"])
    results.send("hello", pid=os.getpid(), warm=warm_limits is not None, **applied)
    return ChildStart(results, job, applied, warmed, warm_limits is not None)
