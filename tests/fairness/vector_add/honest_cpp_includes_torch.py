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
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>

__global__ void vector_add_vec4_kernel(const float4* __restrict__ a,
                                       const float4* __restrict__ b,
                                       float4* __restrict__ out,
                                       int64_t n4) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 x = a[i];
        const float4 y = b[i];
        out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

__global__ void vector_add_scalar_kernel(const float* __restrict__ a,
                                         const float* __restrict__ b,
                                         float* __restrict__ out,
                                         int64_t start, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] + b[i];
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

torch::Tensor vector_add_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    TORCH_CHECK(a.sizes() == b.sizes(), "inputs must have the same shape");
    const at::cuda::OptionalCUDAGuard guard(device_of(a));
    a = a.contiguous();
    b = b.contiguous();
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    if (n == 0) return out;

    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    int64_t done = 0;
    if (aligned16(pa) && aligned16(pb) && aligned16(po)) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            vector_add_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(
                reinterpret_cast<const float4*>(pa), reinterpret_cast<const float4*>(pb),
                reinterpret_cast<float4*>(po), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {
        vector_add_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(
            pa, pb, po, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor vector_add_cuda(torch::Tensor a, torch::Tensor b);
"""

vector_add_ext = load_inline(
    name="cudarl_fair_cpp_include",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["vector_add_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return vector_add_ext.vector_add_cuda(a, b)
