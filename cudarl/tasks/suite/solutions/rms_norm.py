"""Solution for the rms_norm task.

One 256-thread block per row (grid-stride over rows). Pass 1 sums the squares
of the row (float4 loads when every row is 16-byte aligned) and a warp-shuffle
block reduction broadcasts the total; pass 2 re-reads the row (mostly from L2)
and writes x * rsqrt(mean + eps) * weight, fused into one kernel.
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

__device__ __forceinline__ float warp_reduce_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// blockDim.x a multiple of 32; smem holds >= 33 floats; result broadcast to all threads.
__device__ __forceinline__ float block_reduce_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();
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

template <bool VEC>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, int64_t rows, int64_t cols, float eps) {
    __shared__ float smem[33];
    const float inv_cols = 1.0f / (float)cols;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        float ss = 0.0f;
        if (VEC) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const int64_t n4 = cols >> 2;
            for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
                const float4 v = x4[j];
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
                const float v = xr[j];
                ss += v * v;
            }
        }
        const float r = rsqrtf(block_reduce_sum(ss, smem) * inv_cols + eps);
        if (VEC) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const float4* w4 = reinterpret_cast<const float4*>(w);
            float4* y4 = reinterpret_cast<float4*>(yr);
            const int64_t n4 = cols >> 2;
            for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
                const float4 v = x4[j];
                const float4 g = w4[j];
                float4 o;
                o.x = v.x * r * g.x;
                o.y = v.y * r * g.y;
                o.z = v.z * r * g.z;
                o.w = v.w * r * g.w;
                y4[j] = o;
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] * r * w[j];
        }
    }
}

torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    weight = weight.contiguous();
    const int64_t cols = weight.numel();
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == cols, "last dim of x must match the weight");
    auto y = torch::empty_like(x);
    const int64_t rows = cols > 0 ? x.numel() / cols : 0;
    if (rows == 0 || cols == 0) return y;

    const float* px = x.data_ptr<float>();
    const float* pw = weight.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(pw) % 16 == 0) && (reinterpret_cast<uintptr_t>(py) % 16 == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) rms_norm_kernel<true><<<blocks, threads, 0, stream>>>(px, pw, py, rows, cols, (float)eps);
    else rms_norm_kernel<false><<<blocks, threads, 0, stream>>>(px, pw, py, rows, cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor weight, double eps);
"""

rms_norm_ext = load_inline(
    name="suite_rms_norm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rms_norm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(hidden_size) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_ext.rms_norm_cuda(x, self.weight.detach(), float(self.eps))
