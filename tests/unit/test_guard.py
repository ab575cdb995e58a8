"""Stage 1: parsing and screening candidates without running them."""

from cudarl.tester.build.guard import inspect_source
from tests.fixtures.tiny import candidate


def test_good_candidate_passes_and_sources_are_extracted():
    result = inspect_source(candidate())
    assert result.ok, result.reasons
    (build,) = result.builds
    assert build.name == "tiny_add" and build.resolved
    assert "__global__ void add_kernel" in build.cuda_sources[0]


def test_syntax_error_is_a_parse_error_with_the_line():
    result = inspect_source("class ModelNew(:\n  pass\n")
    assert not result.ok and result.outcome == "parse_error"
    assert "line 1" in result.reasons[0]


def test_missing_modelnew_is_rejected_with_a_named_reason():
    source = candidate().replace("class ModelNew", "class Model2")
    result = inspect_source(source)
    assert not result.ok and result.outcome == "rejected"
    assert any("no ModelNew" in r for r in result.reasons)


def test_plain_torch_without_cuda_is_rejected():
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a + b\n"
    result = inspect_source(source)
    assert not result.ok
    assert any("neither calls" in r and "load_inline" in r and "cudarl.nvrtc" in r for r in result.reasons)


def test_load_inline_without_a_kernel_is_rejected():
    source = candidate().replace("__global__ void add_kernel", "void add_kernel")
    result = inspect_source(source)
    assert not result.ok and any("no __global__" in r for r in result.reasons)


def test_concatenated_and_listed_sources_resolve():
    source = '''
from torch.utils.cpp_extension import load_inline
HEAD = "#include <cuda_runtime.h>\\n"
BODY = HEAD + "__global__ void k(float* x) { x[0] = 1; }"
ext = load_inline("named", [""], [BODY], functions=["k"], extra_cuda_cflags=["-lineinfo"])
class ModelNew: pass
'''
    (build,) = inspect_source(source).builds
    assert build.resolved and build.name == "named"
    assert build.cuda_sources[0].startswith("#include") and build.extra_cuda_cflags == ("-lineinfo",)


def test_sources_built_at_run_time_are_marked_unresolved():
    source = '''
from torch.utils.cpp_extension import load_inline
src = "".join(["__glo", "bal__ void k() {}"])
ext = load_inline(name="x", cpp_sources="", cuda_sources=src)
class ModelNew: pass
'''
    result = inspect_source(source)
    assert result.ok  # cannot tell statically that it has no kernel; the build will
    assert not result.builds[0].resolved
