"""The own-kernel verdict (``hardening.judge_own_kernels``: output dependence decides, the time
share only when it is undecided), the knockout's comparison and switch (``judging.knockout``),
and the launch shim on the CPU: it builds, and the dynamic linker binds an nvcc-built library's
kernel launches to it. Holding back launches on a GPU is ``tests/gpu/test_fairness_gpu.py``
(fusion around cuBLAS/cuDNN passes; decoys, ATen in C++, stale memory are ``[torch-work]``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cudarl.tester.judging.hardening import KernelTime, judge_own_kernels
from cudarl.tester.judging.knockout import Knockout, poison_, same_bits, same_outputs
from cudarl.tester.judging.launch_shim import LIBRARY_NAME, build_shim, preload_environment


def test_poison_overwrites_every_dtype():
    floats, ints, flags = torch.ones(3), torch.zeros(3, dtype=torch.int32), torch.tensor([True, False])
    for tensor in (floats, ints, flags):
        poison_(tensor)
    assert torch.isnan(floats).all() and (ints == 2**31 - 1).all() and flags.tolist() == [False, True]


def test_same_bits_treats_identical_nans_as_equal_and_any_difference_as_not():
    a = torch.tensor([1.0, float("nan")])
    assert same_bits(a, a.clone()) and not torch.equal(a, a.clone())
    assert not same_bits(a, torch.tensor([1.0, 0.0])) and not same_bits(a, a.double())
    assert same_outputs([a, 3], [a.clone(), 3]) and not same_outputs([a, 3], [a.clone(), 4])


def test_same_bits_compares_zero_dimensional_results():
    """A loss is a 0-d tensor; found on the GPU when the knockout compared mse_loss's output."""
    a = torch.tensor(float("nan"))
    assert same_bits(a, a.clone()) and not same_bits(torch.tensor(1.0), torch.tensor(2.0))
    assert same_outputs([torch.tensor(3.0)], [torch.tensor(3.0)])


def test_without_a_held_back_launch_the_check_is_undecided_and_a_raise_means_dependence():
    knockout = Knockout(shim=None)
    x = torch.randn(4)
    depends, note = knockout.forward_depends(lambda: [torch.relu(x)], [torch.relu(x)])
    assert depends is None and "no launch" in note and "no launch shim" in note

    def raises() -> list:
        assert knockout.active  # the switch is on during the checked forward
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    depends, note = knockout.forward_depends(raises, [x])
    assert depends is True and "RuntimeError" in note and not knockout.active


def test_nvrtc_launches_are_held_back_only_while_the_switch_is_on():
    from cudarl import nvrtc

    original = nvrtc.Kernel.__call__
    try:
        knockout = Knockout(shim=None)
        knockout.install_on_nvrtc()
        knockout.install_on_nvrtc()  # once only
        kernel = object.__new__(nvrtc.Kernel)
        with pytest.raises(RuntimeError, match="NVIDIA|CUDA"):  # off: the real launcher runs (no GPU here)
            kernel(1, 1, [])
        out = torch.zeros(3)

        def forward() -> list:
            kernel(1, 32, [out])  # held back: nothing runs, nothing is written
            return [out.clone()]

        depends, note = knockout.forward_depends(forward, [torch.zeros(3)])
        assert depends is False and "1 own launch(es) held back" in note and knockout.nvrtc_skipped == 1
    finally:
        nvrtc.Kernel.__call__ = original


def test_the_shim_builds_and_its_preload_goes_in_front(tmp_path, monkeypatch):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine")
    library = build_shim(tmp_path)
    assert library is not None and library.name == LIBRARY_NAME and build_shim(tmp_path) == library
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    assert preload_environment(library) == {"LD_PRELOAD": f"{library}:/opt/other.so"}


def test_a_broken_compiler_leaves_the_tester_without_a_shim_not_without_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "/bin/false")
    monkeypatch.setattr(shutil, "which", lambda name: "/bin/false" if name in ("/bin/false", "cc", "gcc") else None)
    assert build_shim(tmp_path) is None


def test_an_extensions_launches_bind_to_the_preloaded_shim(tmp_path):
    """A real nvcc-built shared library launching a kernel: its launch symbols resolve to the
    shim (the dynamic linker says so, ``LD_DEBUG=bindings``), not to the CUDA runtime."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc on this machine")
    source = tmp_path / "own.cu"
    source.write_text("__global__ void own_kernel(float* x) { x[threadIdx.x] = 1.0f; }\n"
                      "extern \"C\" void launch(float* x) { own_kernel<<<1, 32>>>(x); }\n")
    built = tmp_path / "build" / "own.so"
    built.parent.mkdir()
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o", str(built), str(source)],
                   check=True, capture_output=True, timeout=600)
    shim = build_shim(tmp_path)
    cudart = Path(nvcc).resolve().parents[1] / "lib64"
    probe = ("import ctypes, os, sys\n"
             "from cudarl.tester.judging.launch_shim import LaunchShim\n"
             "shim = LaunchShim.loaded()\n"
             "shim.own_folder(sys.argv[1])\n"
             "ctypes.CDLL(sys.argv[2], mode=os.RTLD_NOW)\n"
             "print('owned', shim.owned(), 'skipped', shim.skipped())\n")
    result = subprocess.run([sys.executable, "-c", probe, str(built.parent), str(built)], capture_output=True,
                            text=True, timeout=120,
                            env={**preload_environment(shim), "LD_DEBUG": "bindings", "PATH": "/usr/bin:/bin",
                                 "LD_LIBRARY_PATH": str(cudart), "PYTHONPATH": str(Path.cwd())})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "owned 0 skipped 0" in result.stdout
    bindings = [line for line in result.stderr.splitlines() if "own.so" in line and "to " in line]
    launch = [line for line in bindings if "`__cudaLaunchKernel'" in line or "`__cudaGetKernel'" in line]
    assert len(launch) == 2 and all(LIBRARY_NAME in line for line in launch), bindings[:20]


def _kernels(own_us: float, library_us: float) -> list[KernelTime]:
    return [KernelTime(name="sm90_xmma_gemm_f32f32_tn", microseconds=library_us, launches=1),
            KernelTime(name="void bias_relu_kernel(float*, float const*, long)", microseconds=own_us, launches=1)]


@pytest.mark.parametrize("own_us,depends,note,expected", [
    (4.0, True, "1 own call(s) poisoned; forward's output changed", None),  # fusion around cuBLAS: 4%
    (96.0, False, "1 own call(s) poisoned; forward's output unchanged", "does not depend"),  # a busy decoy
    (4.0, None, "no call observed", "only 4% of forward's GPU kernel time"),  # torch.ops: the share decides
    (60.0, None, "no call observed", None),
])
def test_dependence_decides_and_the_share_only_when_it_is_undecided(own_us, depends, note, expected):
    share, listed, reason = judge_own_kernels(_kernels(own_us, 100.0 - own_us), {"bias_relu_kernel"}, 0.5,
                                              depends, note)
    assert share == pytest.approx(own_us / 100.0) and [k["own"] for k in listed] == [False, True]
    if expected is None:
        assert reason is None
    else:
        assert reason.startswith("[torch-work]") and expected in reason and note in reason


def test_no_own_kernel_ran_is_its_own_reason_whatever_the_dependence():
    _, _, reason = judge_own_kernels(_kernels(4.0, 96.0), {"other_kernel"}, 0.5, True, "changed")
    assert reason.startswith("[no-own-kernel]") and "other_kernel" in reason
