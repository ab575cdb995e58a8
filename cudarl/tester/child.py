"""The compile child: ``python -m cudarl.tester.child --result-fd N`` with a JSON job on stdin.

Its one job, ``compile``, imports the candidate with ``load_inline`` steered to the tester's build
directory, which builds its extensions (stage 2, extension mode). The candidate's module-level
code runs here, so the child applies the same limits as the runner (no network, file size,
adopting and killing every process it started). Messages go to the result pipe as JSON lines: ``hello``, ``stage``,
``result``; a forged ``compiled`` result gains nothing, since the judge loads the extension
itself. Also home to helpers the judge and the runner share (error classification, inputs).
Evaluation (stages 3-5) is ``judge`` (trusted) and ``runner`` (the candidate's process).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import traceback
from pathlib import Path

from cudarl.tester.channel import ResultWriter

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


def _to_device(values: list, device) -> list:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def make_inputs(reference, device) -> list:
    """The reference's ``get_inputs()`` with ``device`` as torch's default device, so random
    inputs are drawn on the GPU (KernelBench's CPU-side ``torch.randn`` of a 256 MB tensor took
    about a second per trial), then anything still elsewhere is moved there."""
    import torch

    with torch.device(device):
        return _to_device(reference.get_inputs(), device)


def run_compile(job: dict, results: ResultWriter) -> None:
    from cudarl.tester.loading import import_source, install_load_inline_hook

    built = install_load_inline_hook(Path(job["build_root"]), job["arch"], job["cuda_cflags"],
                                     job["jobs"], stub=False, fast=job.get("inline_fast"))
    results.send("stage", stage="compile")
    try:
        import_source(Path(job["candidate_path"]), "cudarl_candidate")
    except BaseException as exc:  # noqa: BLE001 - every failure is the candidate's verdict
        results.finish("resource_limit" if file_too_large(exc) else "compile_error", "compile",
                       [describe_exception(exc)], extensions=built)
    results.finish("compiled", "compile", extensions=built)


def _apply_limits(limits: dict) -> dict:
    from cudarl.tester.isolation import apply_limits

    applied = apply_limits(limits)
    if limits.get("isolate_pids"):
        from cudarl.tester.isolation import become_subreaper

        applied["subreaper"] = become_subreaper()
    return applied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--warm", default=None, metavar="LIMITS_JSON",
                        help="apply these limits, then import torch, before the job arrives (WarmChildren)")
    arguments = parser.parse_args()
    results = ResultWriter(arguments.result_fd)
    applied = None
    warm_limits = json.loads(arguments.warm) if arguments.warm else None
    if warm_limits is not None:
        # Limits first: unsharing the network namespace needs a single-threaded process, and
        # importing torch starts threads.
        applied = _apply_limits(warm_limits)
        from cudarl import _compat

        _compat.import_cpp_extension()  # torch and its extension builder: the slow imports
    raw = sys.stdin.read()
    sys.stdin.close()
    if not raw.strip():
        return  # a warm child whose pool closed
    job = json.loads(raw)
    if job.get("cwd"):
        os.chdir(job["cwd"])
    if applied is None:
        applied = _apply_limits(job["limits"])
    elif job["limits"] != warm_limits:
        results.finish("harness_error", "guard", ["a warm child got a job with other limits than it applied"])
    results.send("hello", pid=os.getpid(), **applied)
    if job["kind"] == "compile":
        run_compile(job, results)
    else:
        results.finish("harness_error", "guard", [f"unknown job kind {job['kind']!r}"])


if __name__ == "__main__":
    main()
