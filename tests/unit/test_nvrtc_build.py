"""NVRTC builds on the CPU (real libnvrtc): cubins and ptxas lines, NVRTC's own errors, the
cache key (an option or architecture change misses, an identical build hits), and concurrent
builders of one kernel in separate processes (one compiles, the others read its cubin)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cudarl import nvrtc_build

SOURCE = r'''
extern "C" __global__ void scale(const float* x, float* y, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = factor * x[i];
}
'''

try:
    nvrtc_build.library()
    HAVE_NVRTC = True
except nvrtc_build.NvrtcUnavailable:
    HAVE_NVRTC = False

pytestmark = pytest.mark.skipif(not HAVE_NVRTC, reason="libnvrtc is not installed here")


def test_a_kernel_compiles_to_a_cubin_with_ptxas_resource_lines():
    cubin, log = nvrtc_build.compile_cubin(SOURCE, "scale", "90", [])
    assert cubin[:4] == b"\x7fELF"
    assert "Compiling entry function 'scale' for 'sm_90'" in log and "registers" in log


def test_a_compile_error_carries_nvrtcs_log():
    with pytest.raises(nvrtc_build.NvrtcCompileError, match=r"error: identifier \"undefined_thing\" is undefined"):
        nvrtc_build.compile_cubin(SOURCE.replace("factor * x[i]", "undefined_thing"), "scale", "90", [])


def test_the_cache_hits_an_identical_build_and_misses_on_any_change(tmp_path):
    first = nvrtc_build.build(SOURCE, "scale", "90", [], tmp_path)
    again = nvrtc_build.build(SOURCE, "scale", "90", [], tmp_path)
    assert not first.cached and again.cached and again.cubin == first.cubin and again.key == first.key
    assert "registers" in again.log
    for changed in (nvrtc_build.build(SOURCE, "scale", "80", [], tmp_path),
                    nvrtc_build.build(SOURCE, "scale", "90", ["--use_fast_math"], tmp_path),
                    nvrtc_build.build(SOURCE + "\n// edit", "scale", "90", [], tmp_path)):
        assert not changed.cached and changed.key != first.key


def test_a_failed_build_is_not_cached(tmp_path):
    broken = SOURCE.replace("factor * x[i]", "undefined_thing")
    for _ in range(2):
        with pytest.raises(nvrtc_build.NvrtcCompileError):
            nvrtc_build.build(broken, "scale", "90", [], tmp_path)
    assert not list(tmp_path.glob("*.cubin"))


_BUILDER = """
import json, sys
from pathlib import Path
from cudarl import nvrtc_build
result = nvrtc_build.build(sys.argv[1], "scale", "90", [], Path(sys.argv[2]))
print(json.dumps({"cached": result.cached, "size": len(result.cubin)}))
"""


def test_concurrent_builders_of_one_kernel_share_one_compile(tmp_path):
    source = SOURCE + "\n// concurrent\n"
    processes = [subprocess.Popen([sys.executable, "-c", _BUILDER, source, str(tmp_path)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err  # no lock error or retry reaches the caller
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(not r["cached"] for r in results) == 1
    assert len({r["size"] for r in results}) == 1
    assert len(list(tmp_path.glob("*.cubin"))) == 1 and not list(tmp_path.glob(".*.tmp"))
