"""Honest solution for the suite task cast_fp32_to_fp16.

float32 -> float16 with round to nearest even (__float2half_rn), exactly like x.half().
The 16-byte-aligned bulk is read as float4 and written as 4 packed halves (one 8-byte
store); a scalar grid-stride kernel handles the tail and misaligned tensors. The halves
are packed through their 16-bit patterns (__half_as_ushort), so no half arithmetic
operators are needed.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>

__device__ __forceinline__ unsigned int pack2(float a, float b) {
    const unsigned int lo = __half_as_ushort(__float2half_rn(a));
    const unsigned int hi = __half_as_ushort(__float2half_rn(b));
    return lo | (hi << 16);  // little-endian: element 0 in the low half
}

__global__ void cast_vec4_kernel(const float4* __restrict__ x, uint2* __restrict__ out, int64_t n4) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = x[i];
        out[i] = make_uint2(pack2(v.x, v.y), pack2(v.z, v.w));
    }
}

__global__ void cast_scalar_kernel(const float* __restrict__ x, __half* __restrict__ out,
                                   int64_t start, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = __float2half_rn(x[i]);
    }
}

static int grid_for(int64_t work, int threads) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t wanted = (work + threads - 1) / threads;
    const int64_t cap = (int64_t)sms * 32;
    return (int)std::max<int64_t>(1, std::min<int64_t>(wanted, cap));
}

static bool aligned(const void* p, uintptr_t bytes) {
    return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

torch::Tensor cast_fp32_to_fp16_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    auto out = torch::empty(x.sizes(), x.options().dtype(torch::kHalf));
    const int64_t n = x.numel();
    if (n == 0) return out;

    const float* px = x.data_ptr<float>();
    __half* po = reinterpret_cast<__half*>(out.data_ptr<at::Half>());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    int64_t done = 0;
    if (aligned(px, 16) && aligned(po, 8)) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            cast_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(
                reinterpret_cast<const float4*>(px), reinterpret_cast<uint2*>(po), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {
        cast_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(px, po, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = r"""
torch::Tensor cast_fp32_to_fp16_cuda(torch::Tensor x);
"""

cast_fp32_to_fp16_ext = load_inline(
    name="suite_cast_fp32_to_fp16",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["cast_fp32_to_fp16_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast_fp32_to_fp16_ext.cast_fp32_to_fp16_cuda(x)
