"""Honest nvrtc-format candidate for vector_add: a grid-stride loop, one kernel."""
import torch
import torch.nn as nn

from cudarl.nvrtc import i64, kernel

SOURCE = r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, long long n) {
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] + b[i];
    }
}
"""
vector_add = kernel(SOURCE, "vector_add")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        if n:
            vector_add(grid=min(max(1, (n + 255) // 256), 132 * 32), block=256, args=[a, b, out, i64(n)])
        return out
