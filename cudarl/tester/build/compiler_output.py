"""Reading compiler output: the ``ptxas -v`` resource report and readable error excerpts.

Compile errors become the optimizer agent's feedback, so they are trimmed to what a person
would read: the error lines with their source line and caret, build paths shortened to file
names, ninja's command echoes and torch's boilerplate dropped.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from cudarl.tester.verdict import KernelResources

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:.*?(\d+) bytes smem)?")


def _demangle(names: list[str]) -> list[str]:
    tool = shutil.which("c++filt")
    if not tool or not names:
        return names
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return names
    demangled = out.splitlines()
    return demangled if len(demangled) == len(names) else names


def parse_ptxas(output: str) -> list[KernelResources]:
    """Per-kernel registers, shared memory, stack and spills from ``ptxas -v`` output."""
    kernels: list[dict] = []
    current: dict | None = None
    for line in output.splitlines():
        if match := _ENTRY.search(line):
            current = {"mangled_name": match.group(1), "arch": match.group(2)}
            kernels.append(current)
        elif current is not None and (match := _PROPS.search(line)):
            current.update(stack_frame_bytes=int(match.group(1)), spill_store_bytes=int(match.group(2)),
                           spill_load_bytes=int(match.group(3)))
        elif current is not None and (match := _USED.search(line)):
            current.update(registers=int(match.group(1)), barriers=int(match.group(2) or 0),
                           shared_memory_bytes=int(match.group(3) or 0))
    unique = {k["mangled_name"]: k for k in kernels}  # a kernel compiled twice is reported once
    names = _demangle(list(unique))
    return [KernelResources(name=name, **info) for name, info in zip(names, unique.values())]


_NOISE = (
    re.compile(r"^\[\d+/\d+\] "),  # ninja progress and command echo
    re.compile(r"^FAILED: "),
    re.compile(r"^ninja: build stopped"),
    re.compile(r"^ptxas info"),
    re.compile(r"^\s+\d+ bytes stack frame"),
    re.compile(r"^Using .* as PyTorch extensions root"),
    re.compile(r"^(Emitting|Building|Loading|Detected) "),
    re.compile(r"^Allowing ninja to set a default"),
)


def trim_errors(log: str, max_lines: int = 40) -> str:
    """The readable part of a failed build's log."""
    lines = []
    for raw in log.splitlines():
        line = re.sub(r"(/[^\s:'\"]+/)([^/\s:'\"]+\.(?:cu|cpp|cuh|h|py))", r"\2", raw.rstrip())
        if not line.strip() or any(p.search(line) for p in _NOISE):
            continue
        lines.append(line)
    # Prefer the block from the first error on; keep everything if no line says "error".
    first = next((i for i, text in enumerate(lines) if re.search(r"\berror\b", text, re.I)), 0)
    kept = lines[first:first + max_lines]
    if len(lines) - first > max_lines:
        kept.append(f"[... {len(lines) - first - max_lines} more lines]")
    return "\n".join(kept)
