"""Honest: the extension is compiled on the first call and its handle kept on ``self`` (a common
pattern in released kernels; a blunt ``[cache]`` rule rejected it).

expect: passed
reason:
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
cpp_source = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.ext is None:  # compiled on first call, kept: compiled code, not data
            self.ext = load_inline(name="cudarl_fair_lazy_handle", cpp_sources=cpp_source,
                                   cuda_sources=cuda_source, functions=["add"])
        return self.ext.add(a.contiguous(), b.contiguous())
