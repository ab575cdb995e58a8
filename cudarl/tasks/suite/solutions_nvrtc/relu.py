"""Honest nvrtc-format candidate for relu: a grid-stride loop, one kernel."""
import torch
import torch.nn as nn

from cudarl.nvrtc import i64, kernel

SOURCE = r"""
extern "C" __global__ void relu(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaxf(x[i], 0.0f);
    }
}
"""
relu = kernel(SOURCE, "relu")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            relu(grid=min(max(1, (n + 255) // 256), 132 * 32), block=256, args=[x, y, i64(n)])
        return y
