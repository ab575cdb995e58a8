"""Honest candidate for the relu task.

Vectorised float4 grid-stride loop over the 16-byte-aligned bulk, plus a
scalar grid-stride kernel for the tail (and for misaligned inputs). NaN
inputs propagate, as in torch.relu.
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

__device__ __forceinline__ float relu1(float v) {
    // (v < 0) is false for NaN, so NaN passes through like torch.relu.
    return v < 0.0f ? 0.0f : v;
}

__global__ void relu_vec4_kernel(const float4* __restrict__ x,
                                 float4* __restrict__ out,
                                 int64_t n4) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = x[i];
        out[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
    }
}

__global__ void relu_scalar_kernel(const float* __restrict__ x,
                                   float* __restrict__ out,
                                   int64_t start, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = relu1(x[i]);
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

torch::Tensor relu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;

    const float* px = x.data_ptr<float>();
    float* po = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    int64_t done = 0;
    if (aligned16(px) && aligned16(po)) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            relu_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(
                reinterpret_cast<const float4*>(px), reinterpret_cast<float4*>(po), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {
        relu_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(px, po, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = r"""
torch::Tensor relu_cuda(torch::Tensor x);
"""

relu_ext = load_inline(
    name="cudarl_relu_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_cuda(x)
