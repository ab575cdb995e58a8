"""The nvrtc format on a real GPU: the launch helper (typed scalars, 2-D grids, dynamic shared
memory above 48 KB, errors), and the tester judging nvrtc candidates by the same rules as
inline ones (suite solutions pass at default and hidden shapes with their own kernels doing
the work; a wrong kernel is incorrect)."""

from __future__ import annotations

import pytest
import torch

from cudarl.nvrtc import KernelArgumentError, f32, i64, kernel
from cudarl.tasks.builtin import suite_solutions
from cudarl.tester import Outcome

pytestmark = pytest.mark.gpu

SCALE = r"""
extern "C" __global__ void scale(const float* x, float* y, float factor, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = factor * x[i];
}
"""

BIG_SHARED = r"""
extern "C" __global__ void reverse_in_shared(const float* x, float* y, int n) {
    extern __shared__ float staged[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = staged[n - 1 - i];
}
"""


def test_typed_scalars_reach_the_kernel_intact():
    x = torch.randn(10_000, device="cuda")
    y = torch.empty_like(x)
    kernel(SCALE, "scale")(grid=(10_000 + 255) // 256, block=256, args=[x, y, f32(0.3), i64(x.numel())])
    torch.cuda.synchronize()
    assert torch.allclose(y, 0.3 * x)
    y.zero_()
    kernel(SCALE, "scale")(grid=40, block=256, args=[x, y, 2.5, i64(x.numel())])  # a float goes as float32
    assert torch.allclose(y, 2.5 * x)


def test_dynamic_shared_memory_above_48_kb_is_opted_into():
    n = 24 * 1024  # 96 KB of floats
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    kernel(BIG_SHARED, "reverse_in_shared")(grid=1, block=1024, args=[x, y, n], shared_mem=n * 4)
    torch.cuda.synchronize()
    assert torch.equal(y, x.flip(0))


def test_a_cpu_tensor_is_refused_before_the_driver():
    with pytest.raises(KernelArgumentError, match="argument 0 is a tensor on cpu"):
        kernel(SCALE, "scale")(grid=1, block=32, args=[torch.zeros(4), torch.zeros(4, device="cuda"), 1.0, i64(4)])


def nvrtc_logs(tester, verdict) -> dict[str, str]:
    """The NVRTC logs kept next to the cubins, to say why a resource report came out empty (seen
    once on an H200 for matmul, not reproduced)."""
    folder = tester.cache.build_root(verdict.compile.cache_key) / "nvrtc"
    return {log.name: log.read_text()[-2000:] for log in sorted(folder.glob("*.log"))} if folder.is_dir() else {}


@pytest.mark.parametrize("solution", suite_solutions(form="nvrtc"), ids=lambda s: s.task_id)
def test_nvrtc_suite_solutions_pass(gpu_tester, tasks, solution):
    verdict = gpu_tester.evaluate(tasks[solution.task_id], solution)
    assert verdict.outcome == Outcome.PASSED, verdict.reasons
    assert verdict.compile.mode == "nvrtc"
    assert verdict.compile.kernels, f"no ptxas resource lines; NVRTC's logs: {nvrtc_logs(gpu_tester, verdict)}"
    assert verdict.correctness.hidden_trials_run >= 1 or not tasks[solution.task_id].hidden
    assert verdict.hardening.own_time_share is not None and verdict.hardening.own_time_share >= 0.5
    print(f"{solution.task_id}: compile {verdict.stage_seconds['compile']:.3f} s, "
          f"{verdict.timing.candidate.median_ms:.4f} ms vs {verdict.timing.reference.median_ms:.4f} ms "
          f"= {verdict.timing.speedup:.2f}x")


def test_a_wrong_nvrtc_kernel_is_incorrect(gpu_tester, tasks):
    honest = suite_solutions({"relu"}, form="nvrtc")[0]
    wrong = honest.model_copy(update={"id": "relu/wrong-nvrtc",
                                      "source": honest.source.replace("fmaxf(x[i], 0.0f)", "x[i]")})
    verdict = gpu_tester.evaluate(tasks["relu"], wrong)
    assert verdict.outcome == Outcome.INCORRECT, verdict.reasons
