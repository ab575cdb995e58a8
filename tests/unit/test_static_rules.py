"""The static hardening rules: each trick is refused with its tag, and honest code is not (every
solution of the built-in suite passes them)."""

from __future__ import annotations

import pytest

from cudarl.tasks.builtin import suite_solutions
from cudarl.tester.build.guard import inspect_source
from cudarl.tester.build.static_rules import kernel_names
from cudarl.tester.kernel_names import kernel_base_name
from tests.fixtures.tiny import candidate


def reasons_of(module_code: str, forward: str | None = None) -> list[str]:
    source = candidate(module_code)
    if forward is not None:
        source = source.replace("        return ext.add(a, b)", forward)
    result = inspect_source(source)
    return result.reasons


@pytest.mark.parametrize("code, tag", [
    ("import gc", "[import]"),
    ("import os\nos.system('true')", "[import]"),
    ("import os\nkill = os.kill", "[import]"),
    ("import os\nalias = os\nalias.system('true')", "[import]"),
    ("from os import environ", "[import]"),
    ("import os as o\no.fork()", "[import]"),
    ("from sys import _getframe", "[import]"),
    ("import threading", "[import]"),
    ("x = getattr(torch, 'cuda')", "[call]"),
    ("exec('1')", "[call]"),
    ("data = open('/proc/self/environ').read()", "[call]"),
    ("x = ().__class__.__base__", "[dunder]"),
    ("torch.cuda.synchronize = lambda *a: None", "[patch]"),
    ("torch.cuda.Event.elapsed_time = lambda self, end: 0.001", "[patch]"),
    ("nn.Module.forward = None", "[patch]"),
    ("x = torch._C", "[private]"),
    ("prof = torch.profiler.profile", "[private]"),
    ("s = torch.cuda.Stream()", "[stream]"),
    ("class Model(nn.Module):\n    pass", "[inherits-reference]"),
    # torch's host-file readers, library loaders and stores
    ("secret = torch.from_file('/etc/hostname', size=16)", "[private]"),
    ("s = torch.UntypedStorage.from_file('/etc/hostname', False, 16)", "[private]"),
    ("torch.ops.load_library('/tmp/evil.so')", "[private]"),
    ("from torch.utils.cpp_extension import load", "[private]"),
    ("import torch.utils.cpp_extension as ce\nce._jit_compile", "[private]"),
    ("store = torch.distributed.TCPStore('127.0.0.1', 1234)", "[private]"),
], ids=lambda v: v if v.startswith("[") else None)
def test_module_level_tricks_are_refused_with_their_tag(code, tag):
    reasons = reasons_of(code)
    assert any(r.startswith(tag) for r in reasons), reasons


@pytest.mark.parametrize("code", [
    'import os\nos.environ.setdefault("MAX_JOBS", "4")',
    'import os\nos.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"\nJOBS = os.cpu_count()',
    'import os.path\nHERE = os.path.dirname(os.getenv("HOME", "/"))',
], ids=["setdefault", "set-and-count", "path"])
def test_os_for_module_level_build_settings_is_allowed(code):
    assert reasons_of(code) == []


def test_os_inside_forward_is_refused_even_for_the_environment():
    reasons = reasons_of("import os", '        key = os.environ.get("SEED")\n        return ext.add(a, b)')
    assert any(r.startswith("[import]") and "inside a function" in r for r in reasons), reasons


@pytest.mark.parametrize("forward, tag", [
    ("        self.last = ext.add(a, b)\n        return self.last", "[cache]"),
    ("        self.cache[a.shape] = ext.add(a, b)\n        return self.cache[a.shape]", "[cache]"),
    ("        global STORE\n        STORE = ext.add(a, b)\n        return STORE", "[cache]"),
    ("        self.seen.append(a)\n        return ext.add(a, b)", "[cache]"),
], ids=["attribute", "dict", "global", "append"])
def test_results_kept_across_calls_are_refused(forward, tag):
    reasons = reasons_of("", forward)
    assert any(r.startswith(tag) for r in reasons), reasons


@pytest.mark.parametrize("forward", [
    "        out = ext.add(a, b)\n        self.last = out\n        return out",
    "        self.static_a = a.clone()\n        return ext.add(a, b)",
    "        for x in (a, b):\n            y = x * 2\n        self.keep = y\n        return ext.add(a, b)",
    "        self.kernels[a.data_ptr()] = ext.add(a, b)\n        return ext.add(a, b)",
    "        self.calls += 1\n        return ext.add(a, b)",
], ids=["through-a-local", "clone", "through-a-loop", "pointer-keyed", "call-counter"])
def test_input_derived_state_is_refused_however_it_gets_there(forward):
    reasons = reasons_of("", forward)
    assert any(r.startswith("[cache]") for r in reasons), reasons


@pytest.mark.parametrize("forward", [
    "        if self.kernel is None:\n            self.kernel = ext\n        return self.kernel.add(a, b)",
    "        global KERNEL\n        if KERNEL is None:\n            KERNEL = ext\n        return KERNEL.add(a, b)",
    "        self.scratch = torch.empty_like(a)\n        return ext.add(a, b)",
    "        self.blocks = (a.numel() + 255) // 256\n        self.dtype = a.dtype\n        return ext.add(a, b)",
    "        self.handles[a.dtype] = ext\n        return ext.add(a, b)",
    "        self.rows = len(a)\n        self.out = torch.empty(a.shape, device=a.device)\n"
    "        return ext.add(a, b)",
], ids=["lazy-handle-on-self", "lazy-global-handle", "scratch-buffer", "launch-configuration", "handles-by-dtype",
        "sizes-and-an-allocation"])
def test_compiled_code_handles_and_scratch_buffers_may_be_kept(forward):
    """Honest kernels compile lazily and keep the handle, launch settings or a scratch buffer;
    none of it holds the inputs' data (``cudarl.tester.build.input_taint``)."""
    source = candidate("KERNEL = None").replace("class ModelNew(nn.Module):\n",
                                                "class ModelNew(nn.Module):\n    kernel = None\n    handles = {}\n\n")
    source = source.replace("        return ext.add(a, b)", forward)
    assert inspect_source(source).reasons == []


def test_a_cache_in_a_module_level_container_is_refused():
    reasons = reasons_of("CACHE = {}",
                         "        CACHE[a.data_ptr()] = ext.add(a, b)\n        return CACHE[a.data_ptr()]")
    assert any(r.startswith("[cache]") for r in reasons), reasons


def test_modelnew_derived_from_model_is_refused():
    source = candidate().replace("class ModelNew(nn.Module)", "class ModelNew(Model)")
    assert any(r.startswith("[inherits-reference]") for r in inspect_source(source).reasons)


@pytest.mark.parametrize("native, words", [
    ("cudaStreamAttrValue v; v.accessPolicyWindow.num_bytes = 1;", "persisting-L2"),
    ("std::thread t([]{});", "starts threads"),
    ("system(\"ls\");", "starts processes"),
    ("FILE* f = fopen(\"x\", \"w\");", "opens files"),
    ("const char* s = getenv(\"HOME\");", "reads the environment"),
    ("cudaStream_t s; cudaStreamCreate(&s);", "own CUDA stream"),
    ("void* h = dlopen(\"libc.so.6\", 0);", "loads code"),
])
def test_cuda_source_tricks_are_refused(native, words):
    source = candidate().replace("__global__ void add_kernel", native + "\n__global__ void add_kernel")
    reasons = inspect_source(source).reasons
    assert any(r.startswith("[cuda-source]") and words in r for r in reasons), reasons


def test_a_forbidden_call_in_a_comment_is_not_a_violation():
    source = candidate().replace("__global__ void add_kernel", "// no std::thread here\n__global__ void add_kernel")
    assert inspect_source(source).ok


def test_static_rules_can_be_turned_off_to_exercise_the_runtime_defenses():
    source = candidate("import os\nos.system('true')")
    assert not inspect_source(source).ok
    assert inspect_source(source, static_rules_enabled=False).ok


@pytest.mark.parametrize("solution", suite_solutions(), ids=lambda s: s.task_id)
def test_every_honest_suite_solution_passes_the_rules_and_names_its_kernels(solution):
    result = inspect_source(solution.source)
    assert result.ok, result.reasons
    assert result.kernel_names, "the own-kernel check needs the candidate's kernel names"


def test_kernel_names_are_found_in_cuda_source():
    source = """
    template <typename T, int N>
    __global__ void __launch_bounds__(256) scale_kernel(const T* x, T* y) {}
    extern "C" __global__ void plain(float* p) {}
    __global__
    void split_line(int n) {}
    """
    assert kernel_names(source) == {"scale_kernel", "plain", "split_line"}


@pytest.mark.parametrize("name, base", [
    ("void add_kernel(float const*, float*, int)", "add_kernel"),
    ("void ns::scale<float, 4>(float const*, float*)", "scale"),
    ("_Z10add_kernelPKfPfi", "add_kernel"),
    ("_ZN2ns5scaleIfLi4EEEvPKT_PS1_", "scale"),
    ("plain", "plain"),
])
def test_profiler_and_compiler_names_reduce_to_the_source_name(name, base):
    assert kernel_base_name(name) == base


@pytest.mark.parametrize("code, tag", [
    ('tm = torch.sys.modules["cudarl.tester.judging.timing"]', "[import]"),
    ("from torch.utils import cpp_extension\ncpp_extension.subprocess.Popen(['sleep', '9'])", "[import]"),
    ("import typing\nx = typing.sys", "[import]"),
    ("x = torch.autograd.profiler.profile", "[private]"),
], ids=["torch.sys", "cpp_extension.subprocess", "typing.sys", "autograd.profiler"])
def test_modules_reached_through_allowed_modules_are_refused(code, tag):
    assert any(r.startswith(tag) for r in reasons_of(code)), reasons_of(code)


@pytest.mark.parametrize("code", [
    "torch.backends.cuda.matmul.allow_tf32 = False",
    "class Op(torch.autograd.Function):\n    pass",
    "import torch.cuda\nimport torch.nn.init",
], ids=["backends-flag", "autograd-function", "torch-submodules"])
def test_ordinary_solution_code_is_not_refused(code):
    assert reasons_of(code) == []


@pytest.mark.parametrize("module_code, tag", [
    ("def helper(x, _seen=[]):\n    return x", "[cache]"),
    ("class Counter:\n    n = 0\n\n\ndef bump():\n    Counter.n += 1", "[cache]"),
    ("class Keeper:\n    def keep(self, x):\n        self.last = x", "[cache]"),
], ids=["mutable-default", "class-counter", "state-in-a-helper-method"])
def test_state_kept_outside_forward_is_refused_too(module_code, tag):
    assert any(r.startswith(tag) for r in reasons_of(module_code)), reasons_of(module_code)


@pytest.mark.parametrize("profiled, own, expected", [
    ("void flash_fwd_kernel<float, 64>(float const*, float*)", {"flash_fwd_kernel"}, True),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(Params)", {"flash_fwd_kernel"}, False),
    ("void (anonymous namespace)::scale<float>(float*)", {"scale"}, True),
    ("void ns::scale<float, 4>(float const*, float*)", {"ns::scale"}, True),
    ("void at::native::vectorized_elementwise_kernel<4>(int)", {"vectorized_elementwise_kernel"}, False),
    ("gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>", {"add_kernel"}, False),
], ids=["own-template", "library-same-base-name", "anonymous-namespace", "own-namespace", "aten", "cublas"])
def test_profiled_kernels_are_matched_to_the_candidates_own(profiled, own, expected):
    from cudarl.tester.judging.hardening import is_own_kernel

    assert is_own_kernel(profiled, own) is expected
