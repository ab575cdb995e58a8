"""Honest candidate for the softmax task (softmax over dim=1 of a 2-D tensor).

One 256-thread block per row (grid-stride over rows), three passes over the
row: block max, block sum of exp(x - max), then write exp(x - max) / sum.
Block reductions use warp shuffles plus a shared-memory step across warps.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>
#include <math_constants.h>

__device__ __forceinline__ float warp_reduce_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// blockDim.x must be a multiple of 32 (at most 1024); smem holds >= 33 floats.
// The result is returned to every thread of the block.
__device__ __forceinline__ float block_reduce_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();  // previous users of smem are done reading it
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = (lane < nwarps) ? smem[lane] : 0.0f;
        t = warp_reduce_sum(t);
        if (lane == 0) smem[32] = t;
    }
    __syncthreads();
    return smem[32];
}

__device__ __forceinline__ float block_reduce_max(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_max(v);
    __syncthreads();
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = (lane < nwarps) ? smem[lane] : -CUDART_INF_F;
        t = warp_reduce_max(t);
        if (lane == 0) smem[32] = t;
    }
    __syncthreads();
    return smem[32];
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    int64_t rows, int64_t cols) {
    __shared__ float smem[33];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;

        float m = -CUDART_INF_F;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
        m = block_reduce_max(m, smem);

        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
        s = block_reduce_sum(s, smem);

        const float inv = 1.0f / s;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
    }
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() == 2, "input must be 2-D");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    if (rows == 0 || cols == 0) return y;

    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    softmax_rows_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor softmax_cuda(torch::Tensor x);
"""

softmax_ext = load_inline(
    name="cudarl_softmax_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_cuda(x)
