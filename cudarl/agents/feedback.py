"""A verdict as the optimizer reads it: short plain text with what it needs to fix or speed up.

Context is the optimizer's scarcest resource, so the text keeps only what a person fixing the
kernel would read: the outcome and stage; compiler errors (the error lines with their source
line and caret; notes, warnings and template backtraces dropped; capped, saying how much was
cut); the first correctness failure with the error figures; timings and the change since the
previous turn; the share of GPU time in the candidate's own kernels; the compiler's resource
report; rejection reasons with their ``[tag]``.

Covered: every outcome, any missing part (each section is left out when its report is absent or
unreadable: this function never raises); ANSI escapes and control characters removed from text
the candidate controls (errors, reasons, kernel names, its own output). Not covered: nothing is
escaped for a markup language, the text goes to the model as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cudarl.tester.verdict import Verdict

MAX_ERROR_LINES = 40
MAX_ERROR_CHARS = 4000
MAX_REASON_CHARS = 800
MAX_REASONS = 6
MAX_KERNELS = 8

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_ERROR_DIAG = re.compile(r"\b(?:fatal )?error\b\s*(?:#\S+)?\s*:", re.I)
_ERROR_WORD = re.compile(r"\berror\b", re.I)
_NOISE = re.compile(r"\b(?:warning|note|remark)\b\s*(?:#\S+)?\s*:|^In file included from|^\s+from \S+[:,]"
                    r"|detected during|instantiation of|required from|In instantiation|In function|"
                    r"errors? detected in the compilation|^compilation terminated|^\[\d+/\d+\] |^ninja: |"
                    r"^FAILED: |^ptxas info|^\s+\d+ bytes stack frame", re.I)
_LOCATION = re.compile(r"^\S+(?:\(\d+\)|:\d+)")  # "file.cu(12)" or "file.cpp:12"
_CONTEXT_LINES = 3  # a source line, a caret, one continuation

OUTCOME_MEANING = {
    "passed": "correct and timed",
    "correct": "correct (timing was off)",
    "compiled": "compiled; it was not run here",
    "rejected": "refused by the judge's rules",
    "parse_error": "the Python source does not parse",
    "format_error": "the answer had no usable candidate",
    "compile_error": "the code did not compile",
    "compile_timeout": "the build ran past its time limit",
    "load_error": "importing the module or constructing ModelNew failed",
    "runtime_error": "forward raised a Python exception",
    "cuda_error": "a CUDA error (illegal access, launch failure, ...)",
    "crashed": "the process died without a result",
    "timeout": "the run was killed at its wall-clock limit",
    "memory_limit": "the run exceeded its host or GPU memory limit",
    "resource_limit": "too many processes or too large a file",
    "incorrect": "the output does not match the reference",
    "harness_error": "the tester failed (not the candidate's fault)",
}


def clean(text: object) -> str:
    """Candidate-controlled text made safe to show: no terminal escapes, no control or
    direction-override characters (which could hide or reorder what the model reads)."""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    return _CONTROL.sub("", _ANSI.sub("", text))


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + f" [... {len(text) - limit} more characters]"


def trim_compile_errors(log: str, max_lines: int = MAX_ERROR_LINES, max_chars: int = MAX_ERROR_CHARS) -> str:
    """The error lines of a build log, each with its source line and caret; everything else
    (warnings, notes, include chains, template backtraces, build tool echoes) dropped."""
    lines = [line.rstrip() for line in clean(log).split("\n")]
    kept: list[str] = []
    context = 0
    for line in lines:
        if not line.strip():
            context = 0
        elif _ERROR_DIAG.search(line) or (_ERROR_WORD.search(line) and not _NOISE.search(line)):
            kept.append(line)
            context = _CONTEXT_LINES
        elif _NOISE.search(line):
            context = 0
        elif context and not _LOCATION.match(line):  # the source line and its caret
            kept.append(line)
            context -= 1
        else:
            context = 0
    if not kept:  # nothing says "error": show the start of what is there
        kept = [line for line in lines if line.strip() and not _NOISE.search(line)]
    total = sum(1 for line in lines if line.strip())
    shown: list[str] = []
    size = 0
    for line in kept[:max_lines]:
        line = _cap(line, 400)
        if size + len(line) + 1 > max_chars:
            break
        shown.append(line)
        size += len(line) + 1
    dropped = max(0, total - len(kept))
    if len(shown) < len(kept):
        shown.append(f"[... {len(kept) - len(shown)} more error lines cut"
                     + (f"; {dropped} lines of notes, warnings and backtraces dropped]" if dropped else "]"))
    elif dropped:
        shown.append(f"[... {dropped} lines of notes, warnings and backtraces dropped]")
    return "\n".join(shown)


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def _header(verdict: Verdict, _previous: float | None) -> list[str]:
    outcome = getattr(verdict.outcome, "value", verdict.outcome)
    stage = getattr(verdict.stage, "value", verdict.stage)
    meaning = OUTCOME_MEANING.get(str(outcome), "")
    return [f"Outcome: {outcome} at stage {stage}" + (f" ({meaning})" if meaning else "")]


def _compile(verdict: Verdict, _previous: float | None) -> list[str]:
    report = verdict.compile
    if report is None or not report.errors:
        return []
    return ["Compiler errors:", trim_compile_errors(report.errors)]


def _reasons(verdict: Verdict, _previous: float | None) -> list[str]:
    errors = verdict.compile.errors.strip() if verdict.compile else ""
    reasons = [r for r in verdict.reasons if r.strip() and (not errors or r.strip() != errors)]
    if verdict.correctness and verdict.correctness.first_failure:  # shown with the trials instead
        reasons = [r for r in reasons if r.strip() != verdict.correctness.first_failure.reason.strip()]
    if not reasons:
        return []
    title = "Rejected because:" if str(getattr(verdict.outcome, "value", "")) == "rejected" else "Reasons:"
    shown = [f"- {_cap(clean(r).strip(), MAX_REASON_CHARS)}" for r in reasons[:MAX_REASONS]]
    if len(reasons) > MAX_REASONS:
        shown.append(f"- [... {len(reasons) - MAX_REASONS} more reasons]")
    return [title, *shown]


def _correctness(verdict: Verdict, _previous: float | None) -> list[str]:
    report = verdict.correctness
    if report is None or report.trials_run + report.hidden_trials_run == 0:
        return []
    line = f"Correctness: {report.trials_passed} of {report.trials_run} trials passed"
    if report.hidden_trials_run:
        line += f", {report.hidden_trials_passed} of {report.hidden_trials_run} on other shapes"
    line += (f"; max abs error {report.max_abs_error:.3g}, max rel error {report.max_rel_error:.3g} "
             f"(atol {report.atol:g}, rtol {report.rtol:g})")
    lines = [line]
    if report.first_failure is not None:
        failure = _cap(clean(report.first_failure.reason).strip(), MAX_REASON_CHARS)
        lines.append(f"First failure (trial {report.first_failure.trial}): {failure}")
    return lines


def _timing(verdict: Verdict, previous: float | None) -> list[str]:
    timing = verdict.timing
    if timing is None:
        return []
    line = (f"Timing: yours {timing.candidate.median_ms:.4g} ms, reference {timing.reference.median_ms:.4g} ms, "
            f"speedup {timing.speedup:.3g}x")
    if previous is not None and previous > 0:
        change = timing.speedup / previous - 1.0
        line += f" (previous {previous:.3g}x, {'+' if change >= 0 else ''}{change * 100:.0f}%)"
    noise = max(timing.candidate.rse, timing.reference.rse)
    return [line + (f"; measurement noise about {_percent(noise)}" if noise >= 0.02 else "")]


def _hardening(verdict: Verdict, _previous: float | None) -> list[str]:
    report = verdict.hardening
    if report is None or report.own_time_share is None:
        return []
    lines = [f"Own kernels: {_percent(report.own_time_share)} of forward's GPU time"]
    top = sorted(report.kernels, key=lambda k: k.microseconds, reverse=True)[:5]
    lines += [f"  {'yours' if k.own else 'other'}: {_cap(clean(k.name), 100)}: {k.microseconds:.1f} us "
              f"in {k.launches} launch{'es' if k.launches != 1 else ''}" for k in top]
    return lines


def _resources(verdict: Verdict, _previous: float | None) -> list[str]:
    report = verdict.compile
    if report is None or not report.kernels:
        return []
    lines = [f"Resources ({report.arch}):"]
    for kernel in report.kernels[:MAX_KERNELS]:
        spills = kernel.spill_store_bytes + kernel.spill_load_bytes
        lines.append(f"  {_cap(clean(kernel.name), 100)}: {kernel.registers} registers, "
                     f"{kernel.shared_memory_bytes} B static shared memory, "
                     + (f"SPILLS {kernel.spill_store_bytes} B stored / {kernel.spill_load_bytes} B loaded"
                        if spills else "no spills")
                     + (f", {kernel.stack_frame_bytes} B stack" if kernel.stack_frame_bytes else ""))
    if len(report.kernels) > MAX_KERNELS:
        lines.append(f"  [... {len(report.kernels) - MAX_KERNELS} more kernels]")
    return lines


def _output(verdict: Verdict, _previous: float | None) -> list[str]:
    """The candidate's own stderr, only where a crash's story may be in it."""
    outcome = str(getattr(verdict.outcome, "value", verdict.outcome))
    if verdict.sandbox is None or outcome not in ("crashed", "cuda_error", "load_error", "runtime_error"):
        return []
    tail = [line for line in clean(verdict.sandbox.stderr).split("\n") if line.strip()][-12:]
    return ["Last lines of stderr:", *(_cap(line, 300) for line in tail)] if tail else []


_SECTIONS: tuple[Callable[[Verdict, float | None], list[str]], ...] = (
    _header, _compile, _reasons, _correctness, _timing, _hardening, _resources, _output)


def feedback_text(verdict: Verdict, previous_speedup: float | None = None) -> str:
    """The model-facing text of one verdict. Each section is independent: a report that is
    missing or malformed leaves its section out rather than losing the whole turn's feedback."""
    parts: list[str] = []
    for section in _SECTIONS:
        try:
            parts.extend(section(verdict, previous_speedup))
        except Exception:  # noqa: BLE001 - feedback must exist for any verdict, however damaged
            continue
    return "\n".join(parts) if parts else "Outcome: unknown"


IMPROVE_REQUEST = "Improve the kernel: a correct, faster version."
"""What follows a verdict's feedback when the whole conversation is kept (``context_mode = "full"``
and the verl agent loop)."""
