"""Solution for the rms_norm_bf16 task.

One 256-thread block per row (grid-stride over rows). Loads 8 bfloat16 at a
time (one 16-byte load) when every row is 16-byte aligned, converts to float,
sums the squares in float32 and reduces over the block; the second pass
re-reads the row and writes bf16(x * rsqrt(mean + eps) * weight), rounding once
(round to nearest even, like torch's .to(torch.bfloat16)).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
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

// 8 bf16 values packed in one 16-byte word.
union Pack8 {
    uint4 u;
    __nv_bfloat16 h[8];
};

template <bool VEC>
__global__ void rms_norm_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                     __nv_bfloat16* __restrict__ y, int64_t rows, int64_t cols, float eps) {
    __shared__ float smem[33];
    const float inv_cols = 1.0f / (float)cols;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const __nv_bfloat16* xr = x + row * cols;
        __nv_bfloat16* yr = y + row * cols;
        float ss = 0.0f;
        if (VEC) {
            const uint4* x8 = reinterpret_cast<const uint4*>(xr);
            const int64_t n8 = cols >> 3;
            for (int64_t j = threadIdx.x; j < n8; j += blockDim.x) {
                Pack8 p;
                p.u = x8[j];
                #pragma unroll
                for (int k = 0; k < 8; ++k) {
                    const float v = __bfloat162float(p.h[k]);
                    ss += v * v;
                }
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
                const float v = __bfloat162float(xr[j]);
                ss += v * v;
            }
        }
        const float r = rsqrtf(block_reduce_sum(ss, smem) * inv_cols + eps);
        if (VEC) {
            const uint4* x8 = reinterpret_cast<const uint4*>(xr);
            const uint4* w8 = reinterpret_cast<const uint4*>(w);
            uint4* y8 = reinterpret_cast<uint4*>(yr);
            const int64_t n8 = cols >> 3;
            for (int64_t j = threadIdx.x; j < n8; j += blockDim.x) {
                Pack8 px, pw, po;
                px.u = x8[j];
                pw.u = w8[j];
                #pragma unroll
                for (int k = 0; k < 8; ++k)
                    po.h[k] = __float2bfloat16(__bfloat162float(px.h[k]) * r * __bfloat162float(pw.h[k]));
                y8[j] = po.u;
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                yr[j] = __float2bfloat16(__bfloat162float(xr[j]) * r * __bfloat162float(w[j]));
        }
    }
}

torch::Tensor rms_norm_bf16_cuda(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && weight.scalar_type() == torch::kBFloat16,
                "inputs must be bfloat16");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    weight = weight.contiguous();
    const int64_t cols = weight.numel();
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == cols, "last dim of x must match the weight");
    auto y = torch::empty_like(x);
    const int64_t rows = cols > 0 ? x.numel() / cols : 0;
    if (rows == 0 || cols == 0) return y;

    const __nv_bfloat16* px = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>());
    const __nv_bfloat16* pw = reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr<at::BFloat16>());
    __nv_bfloat16* py = reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>());
    const bool vec = (cols % 8 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(pw) % 16 == 0) && (reinterpret_cast<uintptr_t>(py) % 16 == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) rms_norm_bf16_kernel<true><<<blocks, threads, 0, stream>>>(px, pw, py, rows, cols, (float)eps);
    else rms_norm_bf16_kernel<false><<<blocks, threads, 0, stream>>>(px, pw, py, rows, cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor rms_norm_bf16_cuda(torch::Tensor x, torch::Tensor weight, double eps);
"""

rms_norm_bf16_ext = load_inline(
    name="suite_rms_norm_bf16",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rms_norm_bf16_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((torch.rand(hidden_size) + 0.5).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_bf16_ext.rms_norm_bf16_cuda(x, self.weight.detach(), float(self.eps))
