"""Honest: the C++ source includes ``<torch/extension.h>`` itself, as stock ``load_inline`` allows
(the fast build once failed on it after the precompiled header).

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
cpp_source = r"""
#include <torch/extension.h>
torch::Tensor add(torch::Tensor a, torch::Tensor b);
"""
ext = load_inline(name="cudarl_fair_cpp_include", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["add"])


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.add(a.contiguous(), b.contiguous())
