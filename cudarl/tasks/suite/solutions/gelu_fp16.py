"""Honest solution for the suite task gelu_fp16.

Exact GELU on float16: each half is widened to float, 0.5 * x * (1 + erff(x / sqrt(2)))
is computed in float (as torch's opmath does), and the result is rounded to nearest even
(__float2half_rn). The 16-byte-aligned bulk moves 8 halves per uint4 load/store; the
halves are unpacked from and packed into 32-bit words through their bit patterns, so no
half arithmetic operators are used. A scalar grid-stride kernel handles the tail.
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

__device__ __forceinline__ float gelu_f(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

__device__ __forceinline__ __half gelu_h(__half h) {
    return __float2half_rn(gelu_f(__half2float(h)));
}

// Two halves packed in a 32-bit word (element 0 in the low 16 bits).
__device__ __forceinline__ unsigned int gelu_pair(unsigned int w) {
    const unsigned int lo = __half_as_ushort(gelu_h(__ushort_as_half((unsigned short)(w & 0xffffu))));
    const unsigned int hi = __half_as_ushort(gelu_h(__ushort_as_half((unsigned short)(w >> 16))));
    return lo | (hi << 16);
}

__global__ void gelu_fp16_vec8_kernel(const uint4* __restrict__ x, uint4* __restrict__ out, int64_t n8) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        const uint4 v = x[i];
        out[i] = make_uint4(gelu_pair(v.x), gelu_pair(v.y), gelu_pair(v.z), gelu_pair(v.w));
    }
}

__global__ void gelu_fp16_scalar_kernel(const __half* __restrict__ x, __half* __restrict__ out,
                                        int64_t start, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = gelu_h(x[i]);
    }
}

static int grid_for(int64_t work, int threads) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t wanted = (work + threads - 1) / threads;
    const int64_t cap = (int64_t)sms * 32;
    return (int)std::max<int64_t>(1, std::min<int64_t>(wanted, cap));
}

static bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

torch::Tensor gelu_fp16_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kHalf, "input must be float16");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;

    const __half* px = reinterpret_cast<const __half*>(x.data_ptr<at::Half>());
    __half* po = reinterpret_cast<__half*>(out.data_ptr<at::Half>());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    int64_t done = 0;
    if (aligned16(px) && aligned16(po)) {
        const int64_t n8 = n / 8;
        if (n8 > 0) {
            gelu_fp16_vec8_kernel<<<grid_for(n8, threads), threads, 0, stream>>>(
                reinterpret_cast<const uint4*>(px), reinterpret_cast<uint4*>(po), n8);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n8 * 8;
    }
    if (done < n) {
        gelu_fp16_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(px, po, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = r"""
torch::Tensor gelu_fp16_cuda(torch::Tensor x);
"""

gelu_fp16_ext = load_inline(
    name="suite_gelu_fp16",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gelu_fp16_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_fp16_ext.gelu_fp16_cuda(x)
