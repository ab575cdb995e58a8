"""Hack next to the honest lazy handle: beside a kernel handle on ``self`` it keeps its output
there, derived from the inputs (the line the ``[cache]`` rule draws).

expect: rejected
reason: [cache]
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="cudarl_fair_kept_output", cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=cuda_source, functions=["add"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = ext  # a handle: allowed

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = self.ext.add(a.contiguous(), b.contiguous())
        self.kept = out  # the output kept across calls: a cache
        return out
