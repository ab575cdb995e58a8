"""Compile throughput measures with the real compilers: the nvrtc format's torch-free compile
stage and its cache (keying, hits, concurrent builders), and the inline path's lighter torch
header with its fallback to the source as written, and build folders that load elsewhere
without a build."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading

import pytest

from cudarl.nvrtc_build import NvrtcUnavailable, library
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Candidate, Outcome, Tester
from cudarl.tester.build.inline_fast import LIGHT_HEADER, UNTRIMMED_MARKER, light_header, trimmed_sources
from cudarl.tester.build.loading import light_arguments
from cudarl.tester.judgement import judge_job
from tests.conftest import make_tester_config

try:
    library()
    HAVE_NVRTC = True
except NvrtcUnavailable:
    HAVE_NVRTC = False
needs_nvrtc = pytest.mark.skipif(not HAVE_NVRTC, reason="libnvrtc is not installed here")


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_suite()}


def _tester(cache_root, **compile_settings) -> Tester:
    return Tester(make_tester_config(compile={"mode": "kernel", **compile_settings}), cache_root=cache_root)


@needs_nvrtc
def test_nvrtc_candidates_compile_without_torch_in_the_child_and_hit_the_cache(tmp_path, tasks):
    tester = _tester(tmp_path)
    for solution in suite_solutions(form="nvrtc"):
        first = tester.build(tasks[solution.task_id], solution)
        assert first.ready, first.verdict.reasons
        report = first.verdict.compile
        assert report.mode == "nvrtc" and not report.cached and report.kernels[0].registers > 0
        again = tester.build(tasks[solution.task_id], solution)
        assert again.verdict.compile.cached and again.verdict.compile.cache_key == report.cache_key


@needs_nvrtc
def test_an_nvrtc_compile_error_is_nvrtcs_own_message(tmp_path, tasks):
    honest = suite_solutions({"relu"}, form="nvrtc")[0]
    broken = Candidate(task_id="relu", id="relu/broken",
                       source=honest.source.replace("fmaxf(x[i], 0.0f)", "fmaxf(x[i])"))
    verdict = _tester(tmp_path).evaluate(tasks["relu"], broken)
    assert verdict.outcome == Outcome.COMPILE_ERROR
    assert "relu.cu(" in verdict.reasons[0] and "error" in verdict.reasons[0]


@needs_nvrtc
def test_the_cache_key_changes_with_arch_and_flags_only(tmp_path, tasks):
    solution = suite_solutions({"vector_add"}, form="nvrtc")[0]
    keys = {}
    for label, settings in {"base": {}, "same": {}, "arch": {"arch": "80"},
                            "flags": {"extra_cuda_cflags": ("-O2",)}}.items():
        built = _tester(tmp_path, **settings).build(tasks["vector_add"], solution)
        keys[label] = (built.verdict.compile.cache_key, built.verdict.compile.cached)
    assert keys["same"] == (keys["base"][0], True)
    assert keys["arch"][0] != keys["base"][0] and not keys["arch"][1]
    assert keys["flags"][0] != keys["base"][0] and not keys["flags"][1]


@needs_nvrtc
def test_concurrent_builds_of_one_candidate_share_one_build(tmp_path, tasks):
    solution = suite_solutions({"softmax"}, form="nvrtc")[0]
    tester = _tester(tmp_path)
    results, errors = [], []

    def build() -> None:
        try:
            results.append(tester.build(tasks["softmax"], solution))
        except Exception as exc:  # noqa: BLE001 - any exception is the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(p.ready for p in results) and len({p.verdict.compile.cache_key for p in results}) == 1
    assert sum(not p.verdict.compile.cached for p in results) == 1


def test_light_header_only_where_it_is_safe():
    plain = ['#include <torch/extension.h>\n__global__ void k() {}\n'
             'torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x); '
             'AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "f", [&] {}); return at::zeros({1}, x.options()); }']
    header = light_header(plain)
    assert header is not None
    includes = re.findall(r"#include <([^>]+)>", header)
    assert includes[:2] == ["ATen/core/Tensor.h", "ATen/Dispatch.h"]
    assert {"ATen/ops/empty_like.h", "ATen/ops/zeros.h"} <= set(includes)
    assert "ATen/ops/Tensor.h" not in includes  # a type, not an operator
    assert "using namespace at;" in header and "kFloat32" in header  # torch's own alias block
    assert trimmed_sources(plain) == [plain[0].replace("<torch/extension.h>", f'"{LIGHT_HEADER}"')]
    assert trimmed_sources(plain)[0].count("\n") == plain[0].count("\n")  # same line numbers
    assert light_header(['#include <torch/types.h>\n__global__ void k() {}']) is not None
    assert light_header(['#include <cuda_runtime.h>\n__global__ void k() {}']) is None  # nothing to lighten
    for needs_more in ("py::object o;", "torch::nn::Linear l(1, 1);", "PYBIND11_MODULE(m, x) {}",
                       "#include <torch/torch.h>"):
        assert light_header([plain[0] + "\n" + needs_more]) is None


def testlight_arguments_write_out_what_load_inline_would_add():
    """load_inline puts its own torch include before the CUDA sources; the light build leaves
    that to cudarl (same lines, torch's include lightened) and keeps the bindings file as stock."""
    source = "__global__ void k(float* x) { x[0] = 1.f; }\ntorch::Tensor f(torch::Tensor x) { return x; }"
    header, arguments = light_arguments({"cuda_sources": source, "cpp_sources": "torch::Tensor f(torch::Tensor x);"})
    assert "ATen/core/Tensor.h" in header
    assert arguments["no_implicit_headers"] is True
    assert arguments["cuda_sources"] == [f'#include "{LIGHT_HEADER}"', "#include <cuda.h>",
                                         "#include <cuda_runtime.h>", source]
    assert arguments["cpp_sources"] == ["#include <torch/extension.h>", "torch::Tensor f(torch::Tensor x);"]
    # A candidate that leaves the implicit headers out itself keeps its own lines.
    own = '#include <torch/extension.h>\n' + source
    _, arguments = light_arguments({"cuda_sources": [own], "cpp_sources": "", "no_implicit_headers": True})
    assert arguments["cuda_sources"] == [own.replace("<torch/extension.h>", f'"{LIGHT_HEADER}"')]
    assert light_arguments({"cuda_sources": [source + "\npy::object o;"], "cpp_sources": ""}) is None
    assert light_arguments({"cpp_sources": "int f();"}) is None  # no CUDA file


FALLBACK = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void copy_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
torch::Tensor copy(torch::Tensor x) {
    TORCH_CHECK(torch::cuda::device_count() >= 0, "no devices");  // torch/cuda.h: not in torch/types.h
    auto y = torch::empty_like(x);
    copy_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
ext = load_inline(name="cudarl_trim_fallback", cpp_sources="torch::Tensor copy(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["copy"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.copy(x)
'''


@pytest.mark.slow
def test_a_source_that_needs_the_full_header_falls_back_and_builds(tmp_path, tasks):
    import torch

    if torch.version.cuda is None:
        pytest.skip("a full extension build needs a CUDA build of torch; this torch is CPU-only")
    tester = Tester(make_tester_config(compile={"mode": "extension"}), cache_root=tmp_path)
    built = tester.build(tasks["relu"], Candidate(task_id="relu", id="relu/fallback", source=FALLBACK))
    assert built.ready, built.verdict.reasons
    build_root = tester.cache.build_root(built.cache_key)
    workdir = tmp_path / "judge"
    workdir.mkdir()
    (workdir / "candidate.py").write_text(FALLBACK)
    assert (build_root / "cudarl_trim_fallback" / UNTRIMMED_MARKER).exists()
    # A new process with the runner's hook (same options) finds the build done: no rebuild.
    before = (build_root / "cudarl_trim_fallback" / ".ninja_log").read_text()
    loader = (
        "import sys, json\nfrom pathlib import Path\n"
        "from cudarl.files import import_source\n"
        "from cudarl.tester.build.loading import install_load_inline_hook\n"
        "job = json.loads(sys.argv[1])\n"
        "install_load_inline_hook(Path(job['build_root']), job['arch'], job['cuda_cflags'], job['jobs'],"
        " stub=False, fast=job['inline_fast'])\n"
        "import_source(Path(job['candidate_path']), 'candidate')\n")
    job = judge_job(tester.config, workdir, build_root, tester.arch, 1e-4, 1e-4, {}, [],
                    inline_fast=tester.inline_fast).to_wire()
    done = subprocess.run([sys.executable, "-c", loader, json.dumps(job)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (build_root / "cudarl_trim_fallback" / ".ninja_log").read_text() == before
    # The build folder is an artifact: copied elsewhere (its build.ninja still names the old
    # path), it loads there without a build.
    elsewhere = tmp_path / "elsewhere" / "build"
    shutil.copytree(build_root, elsewhere)
    library = elsewhere / "cudarl_trim_fallback" / "cudarl_trim_fallback.so"
    stamp = library.stat().st_mtime_ns
    done = subprocess.run([sys.executable, "-c", loader, json.dumps({**job, "build_root": str(elsewhere)})],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert library.stat().st_mtime_ns == stamp and "ninja" not in done.stdout


def test_a_repeated_torch_include_in_the_cpp_source_becomes_a_comment_on_the_fast_path(tmp_path):
    """GCC, having used the precompiled ``torch/extension.h`` for the bindings file's first line,
    fails on a second ``#include`` of it ("extension.h: No such file or directory"); stock
    ``load_inline`` builds such a source, so the fast path drops the repeat (a no-op there)."""
    from cudarl.tester.build.loading import fast_arguments

    stock = {"cpp_sources": ["#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x);"],
             "cuda_sources": [], "extra_include_paths": ["/inc"]}
    changed = fast_arguments(stock, "/pch", tmp_path, trim=False)
    assert changed["extra_include_paths"] == ["/pch", "/inc"]
    assert changed["cpp_sources"] == ["// #include <torch/extension.h> (already included)\n"
                                      "torch::Tensor f(torch::Tensor x);"]  # one line stays one line
    assert fast_arguments({**stock, "extra_cflags": ["-O1"]}, "/pch", tmp_path, trim=False) is None  # no PCH
    assert fast_arguments(stock, None, tmp_path, trim=False) is None  # nothing to change: the stock build


TORCH_INCLUDE_IN_CPP = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
cpp_source = "#include <torch/extension.h>\\ntorch::Tensor relu(torch::Tensor x);"
ext = load_inline(name="cudarl_include_in_cpp", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
'''


@pytest.mark.slow
def test_a_cpp_source_including_the_torch_header_builds_on_the_fast_path(tmp_path, tasks):
    import torch

    if torch.version.cuda is None:
        pytest.skip("a full extension build needs a CUDA build of torch; this torch is CPU-only")
    tester = Tester(make_tester_config(compile={"mode": "extension"}), cache_root=tmp_path)  # PCH on
    built = tester.build(tasks["relu"], Candidate(task_id="relu", id="relu/include", source=TORCH_INCLUDE_IN_CPP))
    assert built.ready, built.verdict.reasons
    folder = tester.cache.build_root(built.cache_key) / "cudarl_include_in_cpp"
    assert not (folder / UNTRIMMED_MARKER).exists()  # the fast build itself worked: no second build
    assert "// #include <torch/extension.h> (already included)" in (folder / "main.cpp").read_text()
