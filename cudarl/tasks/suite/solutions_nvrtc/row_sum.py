"""Honest nvrtc-format candidate for row_sum: one block per row, a shared-memory tree reduction."""
import torch
import torch.nn as nn

from cudarl.nvrtc import i64, kernel

SOURCE = r"""
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ out, long long cols) {
    __shared__ float partial[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float sum = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) sum += row[j];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
"""
row_sum = kernel(SOURCE, "row_sum")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        if rows:
            row_sum(grid=rows, block=256, args=[x, out, i64(cols)])
        return out
