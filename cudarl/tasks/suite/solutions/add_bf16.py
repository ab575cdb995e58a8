"""Honest solution for the suite task add_bf16.

a + b on bfloat16: each pair is widened to float, added, and rounded to nearest even
(__float2bfloat16_rn), which is what torch does. The 16-byte-aligned bulk moves 8
bfloat16 values per uint4 load/store, unpacked and packed through their bit patterns
(no bfloat16 arithmetic operators); a scalar grid-stride kernel handles the tail.
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

__device__ __forceinline__ __nv_bfloat16 add_bf(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}

__device__ __forceinline__ __nv_bfloat16 lo_bf(unsigned int w) {
    return __ushort_as_bfloat16((unsigned short)(w & 0xffffu));
}

__device__ __forceinline__ __nv_bfloat16 hi_bf(unsigned int w) {
    return __ushort_as_bfloat16((unsigned short)(w >> 16));
}

// Two bfloat16 packed in a 32-bit word (element 0 in the low 16 bits).
__device__ __forceinline__ unsigned int add_pair(unsigned int wa, unsigned int wb) {
    const unsigned int lo = __bfloat16_as_ushort(add_bf(lo_bf(wa), lo_bf(wb)));
    const unsigned int hi = __bfloat16_as_ushort(add_bf(hi_bf(wa), hi_bf(wb)));
    return lo | (hi << 16);
}

__global__ void add_bf16_vec8_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                     uint4* __restrict__ out, int64_t n8) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        const uint4 va = a[i];
        const uint4 vb = b[i];
        out[i] = make_uint4(add_pair(va.x, vb.x), add_pair(va.y, vb.y),
                            add_pair(va.z, vb.z), add_pair(va.w, vb.w));
    }
}

__global__ void add_bf16_scalar_kernel(const __nv_bfloat16* __restrict__ a,
                                       const __nv_bfloat16* __restrict__ b,
                                       __nv_bfloat16* __restrict__ out, int64_t start, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = add_bf(a[i], b[i]);
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

torch::Tensor add_bf16_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kBFloat16,
                "inputs must be bfloat16");
    TORCH_CHECK(a.sizes() == b.sizes(), "inputs must have the same shape");
    const at::cuda::OptionalCUDAGuard guard(device_of(a));
    a = a.contiguous();
    b = b.contiguous();
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    if (n == 0) return out;

    const __nv_bfloat16* pa = reinterpret_cast<const __nv_bfloat16*>(a.data_ptr<at::BFloat16>());
    const __nv_bfloat16* pb = reinterpret_cast<const __nv_bfloat16*>(b.data_ptr<at::BFloat16>());
    __nv_bfloat16* po = reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    int64_t done = 0;
    if (aligned16(pa) && aligned16(pb) && aligned16(po)) {
        const int64_t n8 = n / 8;
        if (n8 > 0) {
            add_bf16_vec8_kernel<<<grid_for(n8, threads), threads, 0, stream>>>(
                reinterpret_cast<const uint4*>(pa), reinterpret_cast<const uint4*>(pb),
                reinterpret_cast<uint4*>(po), n8);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n8 * 8;
    }
    if (done < n) {
        add_bf16_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(pa, pb, po, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = r"""
torch::Tensor add_bf16_cuda(torch::Tensor a, torch::Tensor b);
"""

add_bf16_ext = load_inline(
    name="suite_add_bf16",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_bf16_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_bf16_ext.add_bf16_cuda(a, b)
