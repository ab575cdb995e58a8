"""The precompiled header, made once per machine and torch version: ``ensure_pch`` runs this module
as a probe (``python -m cudarl.tester.build.pch_probe PCH_ROOT ARCH CFLAGS JOBS``): a probe ``load_inline``
with the tester's hook installed writes the build file whose flags the precompiled
``torch/extension.h`` must match, then ``inline_fast.build_pch`` builds the header. An entry
module of its own: it needs ``loading`` (the hook), which needs ``inline_fast``; keeping the
probe out of ``inline_fast`` keeps the imports pointing one way.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from cudarl import _compat
from cudarl.tester.build.inline_fast import build_pch, pch_dir_for, pch_header
from cudarl.tester.build.loading import install_load_inline_hook

_PROBE_CUDA = 'extern "C" __global__ void cudarl_probe_kernel(float* x) { x[0] = 1.0f; }\n'
_PROBE_CPP = "int cudarl_probe() { return 1; }\n"


def ensure_pch(pch_root: Path, arch: str, cuda_cflags: list[str], jobs: int, timeout_s: float = 600.0) -> str:
    """The machine's precompiled header for candidates without their own ``extra_cflags``:
    present, or built now in a child process (a probe build plus the PCH; once per machine and
    torch version). Returns what happened."""
    if pch_header(pch_dir_for(pch_root)).exists():
        return "present"
    command = [sys.executable, "-m", __name__, str(pch_root), arch, json.dumps(cuda_cflags), str(jobs)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "failed: the probe build timed out"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else f"failed: {done.stderr.strip()[-300:]}"


def main() -> None:
    pch_root, arch, cuda_cflags, jobs = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    pch_dir = pch_dir_for(pch_root)
    probe_root = pch_root / f"probe-{pch_dir.name}"
    flags_only = "no_implicit_headers" in inspect.signature(_compat.import_cpp_extension().load_inline).parameters
    install_load_inline_hook(probe_root, arch, cuda_cflags, jobs, stub=False,
                             fast={"trim": False, "pch_root": str(pch_root)})
    cpp = _compat.import_cpp_extension()
    if flags_only:
        # Only the build file is needed: sources that stop at once still get the real flags
        # (no_implicit_headers changes the sources, not the flags), so the probe costs a second.
        try:
            cpp.load_inline("cudarl_pch_probe", "#error flags probe", cuda_sources="#error flags probe",
                            no_implicit_headers=True)
        except Exception:  # noqa: BLE001 - the expected failure; build.ninja is written before it
            pass
    else:
        cpp.load_inline("cudarl_pch_probe", _PROBE_CPP, cuda_sources=_PROBE_CUDA, functions=["cudarl_probe"])
    print(build_pch(pch_dir, probe_root / "cudarl_pch_probe"))


if __name__ == "__main__":
    main()
