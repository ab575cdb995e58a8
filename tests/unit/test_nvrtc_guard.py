"""The guard on nvrtc-format candidates: the format is recognised, literal kernel sources are
extracted for the fast compile path, and the helper's private parts are out of reach."""

from __future__ import annotations

from cudarl.tasks.builtin import suite_solutions
from cudarl.tester.build.guard import inspect_source


def test_suite_nvrtc_solutions_are_recognised_with_their_sources():
    for solution in suite_solutions(form="nvrtc"):
        guard = inspect_source(solution.source)
        assert guard.ok and guard.format == "nvrtc", (solution.id, guard.reasons)
        assert guard.nvrtc_builds and all(b.resolved and "__global__" in b.source for b in guard.nvrtc_builds)
        assert set(guard.kernel_names) >= {b.name for b in guard.nvrtc_builds}


def test_module_alias_and_options_are_extracted():
    source = '''
import torch.nn as nn
import cudarl.nvrtc as nv
OPTIONS = ("--use_fast_math",)
BODY = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'
k = nv.kernel(BODY, name="k", options=OPTIONS)
class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''
    guard = inspect_source(source)
    assert guard.ok and guard.format == "nvrtc"
    assert guard.nvrtc_builds[0].options == ("--use_fast_math",) and guard.nvrtc_builds[0].name == "k"


def test_a_source_built_at_run_time_is_marked_unresolved():
    source = '''
import torch.nn as nn
from cudarl.nvrtc import kernel
def make(n):
    return 'extern "C" __global__ void k(float* x) { x[0] = %d; }' % n
k = kernel(make(3), "k")
class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''
    guard = inspect_source(source)
    assert guard.format == "nvrtc" and not guard.nvrtc_builds[0].resolved


def test_private_parts_of_the_helper_are_refused():
    for line in ("from cudarl.nvrtc import _driver", "import cudarl.nvrtc as nv\nd = nv._driver()",
                 "from cudarl.nvrtc import kernel\nk = kernel.__globals__"):
        source = f'''
import torch.nn as nn
{line}
from cudarl.nvrtc import kernel
k2 = kernel('extern "C" __global__ void k(float* x) {{ }}', "k")
class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''
        guard = inspect_source(source)
        assert not guard.ok and guard.outcome == "rejected", line
