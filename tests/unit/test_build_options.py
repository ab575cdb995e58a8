"""The build-option allowlist (``cudarl.tester.build.build_options``): the options honest kernels
use pass; every option that writes, reads or loads a file, or links by path, is refused with the
option named; the guard refuses literal ones with the static rules on and off; NVRTC options and include
directives likewise (``cudarl.build_rules``)."""

from __future__ import annotations

import pytest

from cudarl.tester.build.build_options import refused_build_options
from cudarl.tester.build.guard import inspect_source

HONEST = {
    "extra_cuda_cflags": ["-O3", "--use_fast_math", "-lineinfo", "-Xptxas=-v", "-Xptxas", "-O3,-v", "-std=c++17",
                          "--expt-relaxed-constexpr", "--extended-lambda", "-DBLOCK=256", "-D", "TILE", "-UNDEBUG",
                          "-maxrregcount", "64", "--maxrregcount=128", "-arch=sm_90a", "-Xcompiler", "-fopenmp,-O3",
                          "--ptxas-options=-v", "-gencode=arch=compute_80,code=sm_80", "-Wno-deprecated-gpu-targets",
                          "--ftz=true", "--prec-div=false", "-w"],
    "extra_cflags": ["-O3", "-std=c++17", "-fopenmp", "-DX=1", "-ffast-math", "-march=native"],
    "extra_ldflags": ["-lcublas", "-lcublasLt", "-lcudnn", "-lcurand"],
}


def test_the_options_honest_kernels_use_pass():
    assert refused_build_options(HONEST) == []
    assert refused_build_options({"extra_cuda_cflags": "-O2"}) == []  # one string, as load_inline takes it too


@pytest.mark.parametrize("key,options,named", [
    ("extra_cuda_cflags", ["--keep", "--keep-dir", "/tmp/out"], ["--keep", "--keep-dir", "/tmp/out"]),
    ("extra_cuda_cflags", ["-MD", "-MF", "/tmp/deps"], ["-MD", "-MF", "/tmp/deps"]),
    ("extra_cuda_cflags", ["-o", "/tmp/x.o", "-save-temps", "@/etc/passwd"], ["-o", "/tmp/x.o", "-save-temps",
                                                                            "@/etc/passwd"]),
    ("extra_cuda_cflags", ["-I/etc", "--pre-include=/etc/passwd", "-include", "x.h"], ["-I/etc",
                                                                                      "--pre-include=/etc/passwd",
                                                                                      "-include"]),
    ("extra_cuda_cflags", ["-ccbin=/tmp/gcc", "-Xcompiler", "-fplugin=/tmp/p.so,-B/tmp"], ["-ccbin=/tmp/gcc",
                                                                                      "-fplugin=/tmp/p.so", "-B/tmp"]),
    ("extra_cuda_cflags", ["-Xptxas=--output-file=/tmp/z", "-DX=/etc/passwd", "-Wl,-rpath,/tmp"],
     ["--output-file=/tmp/z", "-DX=/etc/passwd", "-Wl,-rpath,/tmp"]),
    ("extra_cflags", ["-I/etc", "-include/etc/passwd", "-Wp,-MD,/tmp/f"], ["-I/etc", "-include/etc/passwd",
                                                                          "-Wp,-MD,/tmp/f"]),
    ("extra_ldflags", ["-L/tmp", "-Wl,--version-script=/etc/passwd", "/tmp/lib.so", "-lmine"],
     ["-L/tmp", "-Wl,--version-script=/etc/passwd", "/tmp/lib.so", "-lmine"]),
    ("extra_include_paths", ["/etc"], ["/etc"]),
])
def test_options_that_touch_files_are_refused_by_name(key, options, named):
    reasons = refused_build_options({key: options})
    assert all(reason.startswith("[build-option] ") for reason in reasons)
    for option in named:
        assert any(f"{option!r} is not allowed" in reason for reason in reasons), (option, reasons)


SOURCE = '''import torch
from torch.utils.cpp_extension import load_inline

CUDA = "__global__ void add(const float* a, const float* b, float* out, int n) {}"
ext = load_inline("add_ext", [""], [CUDA], functions=[], extra_cuda_cflags=["-O3", "--keep-dir", "/tmp/cudarl-k"])


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return a + b
'''


@pytest.mark.parametrize("static_rules", [True, False])
def test_the_guard_refuses_literal_options_with_or_without_the_static_rules(static_rules):
    result = inspect_source(SOURCE, static_rules_enabled=static_rules)
    assert not result.ok and result.outcome == "rejected"
    assert "[build-option] nvcc option '--keep-dir' is not allowed" in result.reasons
    assert "[build-option] nvcc option '/tmp/cudarl-k' is not allowed" in result.reasons
    assert inspect_source(SOURCE.replace(', "--keep-dir", "/tmp/cudarl-k"', ""), static_rules).ok


NVRTC_SOURCE = '''import torch
from cudarl.nvrtc import kernel

k = kernel('extern "C" __global__ void k(float* x) { }', "k", options=["--use_fast_math", OPTION])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


@pytest.mark.parametrize("option", ["--include-path=/etc", "-I/etc", "--pre-include=/etc/passwd",
                                    "--gpu-architecture=sm_80"])
def test_nvrtc_options_that_read_files_or_change_the_target_are_refused_at_the_guard_and_at_the_compiler(option):
    from cudarl.nvrtc_build import NvrtcCompileError, compile_cubin

    result = inspect_source(NVRTC_SOURCE.replace("OPTION", repr(option)), static_rules_enabled=False)
    assert not result.ok and f"[build-option] NVRTC option {option!r} is not allowed" in result.reasons
    with pytest.raises(NvrtcCompileError, match="is not allowed"):  # options built at run time reach this
        compile_cubin('extern "C" __global__ void k(float* x) { }', "k", "90", ["--use_fast_math", option])
    assert inspect_source(NVRTC_SOURCE.replace("OPTION", repr("-DTILE=32")), static_rules_enabled=False).ok


def test_includes_by_absolute_path_up_and_out_or_computed_are_refused():
    from cudarl.build_rules import refused_includes

    honest = ('#include <torch/extension.h>\n#include "cuda_fp16.h"\n  #  include <c10/cuda/CUDAGuard.h> // ok\n'
              "#if __has_include(<cuda_bf16.h>)\n#endif\n")
    assert refused_includes(honest) == []
    for line in ('#include "/etc/hostname"', "#include <../../etc/passwd>", '#in\\\nclude "/root/x"',
                 '#define P "/etc/p"\n#include P', "#include_next </x>", '#embed "/etc/x"', '#include "~/x"',
                 'asm(".incbin \\"/etc/passwd\\"");', '#if __has_include("/etc/shadow")\n#endif'):
        reasons = refused_includes(line)
        assert len(reasons) == 1 and reasons[0].startswith("[include] "), (line, reasons)


def test_an_include_of_a_host_file_is_refused_at_the_guard_and_where_it_reaches_nvrtc():
    from cudarl.nvrtc_build import NvrtcCompileError, compile_cubin

    source = NVRTC_SOURCE.replace("'extern", "'#include \"/etc/hostname\"\\nextern").replace(", OPTION", "")
    result = inspect_source(source, static_rules_enabled=False)
    assert not result.ok and any(r.startswith('[include] `#include "/etc/hostname"`') for r in result.reasons)
    with pytest.raises(NvrtcCompileError, match=r"\[include\]"):
        compile_cubin('#include "/etc/hostname"\nextern "C" __global__ void k(float* x) { }', "k", "90", [])
