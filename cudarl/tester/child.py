"""The sandboxed child: ``python -m cudarl.tester.child --result-fd N`` with a JSON job on stdin.

Two jobs. ``compile`` imports the candidate with ``load_inline`` steered to the tester's build
directory, which builds its extensions (stage 2, extension mode). ``evaluate`` loads the
reference and the candidate, then, when a GPU is present, checks correctness on fresh seeded
inputs and times both (stages 3-5). Messages go to the result pipe as JSON lines: ``hello``,
``stage`` (progress, so a crash or hang can be placed), ``result``. Correctness also runs on
the CPU when the job sets ``cpu_correctness`` (pure-PyTorch candidates: checking references and
the checking rules themselves without a GPU); timing never does. The process exits right after
its result; after a CUDA error nothing else is attempted in it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

_RESULT_FD = -1
_CUDA_ERROR_MARKERS = (
    "CUDA error", "cudaError", "illegal memory access", "unspecified launch failure",
    "device-side assert", "CUDA_ERROR", "misaligned address", "an illegal instruction",
    "CUBLAS_STATUS", "launch timed out",
)


def send(event: str, **fields) -> None:
    line = json.dumps({"event": event, "t": time.time(), **fields}, default=str) + "\n"
    os.write(_RESULT_FD, line.encode())


def finish(outcome: str, stage: str, reasons: list[str] | None = None, **fields) -> None:
    send("result", outcome=outcome, stage=stage, reasons=reasons or [], **fields)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip atexit/CUDA teardown: a broken context must not hang the exit


def describe_exception(exc: BaseException, limit: int = 3000) -> str:
    """A readable, trimmed traceback: the candidate's frames and the error line."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines)
    if len(text) > limit:
        text = text[:limit // 3] + "\n[...]\n" + text[-(2 * limit) // 3:]
    return text.strip()


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
    return "load_error" if stage == "load" else "runtime_error"


def _to_device(values: list, device) -> list:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _make_inputs(reference, device) -> list:
    """The reference's ``get_inputs()`` with ``device`` as torch's default device, so random
    inputs are drawn on the GPU (KernelBench's CPU-side ``torch.randn`` of a 256 MB tensor took
    about a second per trial), then anything still elsewhere is moved there."""
    import torch

    with torch.device(device):
        return _to_device(reference.get_inputs(), device)


def _clone(values: list) -> list:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _check_trials(label: str, seeds: list[int], reference, ref_model, new_model, device, atol: float,
                  rtol: float, report: dict) -> None:
    """Run correctness trials; on the first failure, finish the child with ``incorrect``."""
    import torch

    from cudarl.tester import correctness

    key = "hidden_trials" if label.startswith("hidden") else "trials"
    with torch.no_grad():
        for trial, trial_seed in enumerate(seeds):
            send("stage", stage="correctness", trial=trial if key == "trials" else f"hidden {trial}")
            torch.manual_seed(trial_seed)
            inputs = _make_inputs(reference, device)
            ref_out = ref_model(*_clone(inputs))
            candidate_inputs = _clone(inputs)
            out = new_model(*candidate_inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            report[f"{key}_run"] += 1
            problem = correctness.inputs_unchanged(inputs, candidate_inputs)
            result = correctness.compare_outputs(out, ref_out, atol, rtol)
            report["max_abs_error"] = max(report["max_abs_error"], result.max_abs_error)
            report["max_rel_error"] = max(report["max_rel_error"], result.max_rel_error)
            problem = problem or result.reason
            if problem:
                number = trial if key == "trials" else report["trials_run"] + trial
                report["first_failure"] = {"trial": number, "reason": f"{label} {trial}: {problem}"}
                finish("incorrect", "correctness", [f"{label} {trial}: {problem}"], correctness=report)
            report[f"{key}_passed"] += 1
            del inputs, ref_out, out, candidate_inputs


def run_compile(job: dict) -> None:
    from cudarl.tester.loading import import_source, install_load_inline_hook

    built = install_load_inline_hook(Path(job["build_root"]), job["arch"], job["cuda_cflags"],
                                     job["jobs"], stub=False)
    send("stage", stage="compile")
    try:
        import_source(Path(job["candidate_path"]), "cudarl_candidate")
    except BaseException as exc:  # noqa: BLE001 - every failure is the candidate's verdict
        finish("compile_error", "compile", [describe_exception(exc)], extensions=built)
    finish("compiled", "compile", extensions=built)


def run_evaluate(job: dict) -> None:
    import torch

    from cudarl.config import TimingConfig
    from cudarl.tester import correctness, timing
    from cudarl.tester.loading import import_source, install_load_inline_hook

    secret = random.Random(job.pop("seed"))  # the seed leaves the job dict before any candidate code runs
    init_seed, trial_seeds = secret.getrandbits(62), [secret.getrandbits(62) for _ in range(job["trials"])]
    has_gpu = torch.cuda.is_available()
    device = torch.device("cuda") if has_gpu else torch.device("cpu")
    if has_gpu:
        torch.cuda.set_per_process_memory_fraction(job["gpu_memory_fraction"])
    stage = "load"
    send("stage", stage=stage)
    try:
        reference = import_source(Path(job["task_path"]), "cudarl_reference")
        init_inputs = reference.get_init_inputs()
        torch.manual_seed(init_seed)
        ref_model = reference.Model(*init_inputs).to(device).eval()
    except BaseException as exc:  # noqa: BLE001
        finish("harness_error", stage, [f"the task's reference failed to load: {describe_exception(exc)}"])
    try:
        install_load_inline_hook(Path(job["build_root"]), job["arch"], job["cuda_cflags"], job["jobs"],
                                 stub=not has_gpu)
        candidate = import_source(Path(job["candidate_path"]), "cudarl_candidate")
        if not hasattr(candidate, "ModelNew"):
            finish("load_error", stage, ["the candidate module defines no ModelNew"])
        torch.manual_seed(init_seed)
        new_model = candidate.ModelNew(*init_inputs).to(device).eval()
        if has_gpu:
            torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001
        finish(classify(exc, stage), stage, [f"loading ModelNew failed: {describe_exception(exc)}"])
    if not has_gpu and not job.get("cpu_correctness"):
        finish("loaded", stage)

    atol, rtol = job["atol"], job["rtol"]
    report = {"trials_run": 0, "trials_passed": 0, "hidden_trials_run": 0, "hidden_trials_passed": 0,
              "atol": atol, "rtol": rtol,
              "max_abs_error": 0.0, "max_rel_error": 0.0, "first_failure": None}
    stage = "correctness"
    try:
        _check_trials("trial", trial_seeds, reference, ref_model, new_model, device, atol, rtol, report)
        if job.get("hidden"):
            # The second shape set: the reference's constants replaced, both models rebuilt.
            saved = {name: getattr(reference, name) for name in job["hidden"]}
            for name, value in job["hidden"].items():
                setattr(reference, name, value)
            hidden_init = reference.get_init_inputs()
            torch.manual_seed(init_seed)
            hidden_ref = reference.Model(*hidden_init).to(device).eval()
            torch.manual_seed(init_seed)
            hidden_new = candidate.ModelNew(*hidden_init).to(device).eval()
            hidden_seeds = [secret.getrandbits(62) for _ in range(job["hidden_trials"])]
            _check_trials("hidden-shape trial", hidden_seeds, reference, hidden_ref, hidden_new, device,
                          atol, rtol, report)
            del hidden_ref, hidden_new
            for name, value in saved.items():
                setattr(reference, name, value)
        if not job["timing"]["enabled"] or device.type != "cuda":
            finish("correct", stage, correctness=report)
        stage = "timing"
        config = TimingConfig(**job["timing"])
        flush = timing.l2_flush_buffer(device)
        with torch.no_grad():
            torch.manual_seed(trial_seeds[0])
            inputs = _make_inputs(reference, device)
            ref_inputs, cand_inputs = _clone(inputs), _clone(inputs)
            expected = ref_model(*_clone(inputs))
            send("stage", stage=stage, model="reference")
            ref_stats = timing.time_callable(lambda: ref_model(*ref_inputs), flush, config)
            send("stage", stage=stage, model="candidate")
            recheck: list[str] = []
            cand_stats = timing.time_callable(
                lambda: new_model(*cand_inputs), flush, config,
                on_output=lambda o: recheck.append(correctness.compare_outputs(o, expected, atol, rtol).reason))
        if recheck and recheck[0]:
            finish("incorrect", stage, [f"output changed during timing: {recheck[0]}"], correctness=report)
        timing_report = {
            "candidate": cand_stats.model_dump(), "reference": ref_stats.model_dump(),
            "speedup": ref_stats.median_ms / cand_stats.median_ms if cand_stats.median_ms > 0 else 0.0,
            "l2_flush_bytes": flush.numel(), "device": torch.cuda.get_device_name(device),
        }
        finish("passed", "done", correctness=report, timing=timing_report)
    except BaseException as exc:  # noqa: BLE001
        finish(classify(exc, stage), stage, [describe_exception(exc)], correctness=report)


def main() -> None:
    global _RESULT_FD
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--result-fd", type=int, required=True)
    _RESULT_FD = parser.parse_args().result_fd
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    from cudarl.tester.isolation import apply_limits

    applied = apply_limits(job["limits"]["file_size_limit_mb"], job["limits"]["isolate_network"])
    send("hello", pid=os.getpid(), **applied)
    if job["kind"] == "compile":
        run_compile(job)
    elif job["kind"] == "evaluate":
        run_evaluate(job)
    else:
        finish("harness_error", "guard", [f"unknown job kind {job['kind']!r}"])


if __name__ == "__main__":
    main()
