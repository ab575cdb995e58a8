"""Solution for the mse_loss task: mean((predictions - targets)^2) as a 0-d tensor.

Two deterministic kernels. The first runs a few blocks per SM, grid-stride
over the flattened inputs (float4 loads for the 16-byte aligned bulk, scalar
loads for the tail), accumulates squared differences in float and writes one
partial sum per block. The second, a single block, adds the partials and
divides by the element count.
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

// blockDim.x a multiple of 32; smem holds >= 32 floats; the result is valid in thread 0.
__device__ __forceinline__ float block_reduce_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = 0.0f;
    if (warp == 0) {
        v = (lane < nwarps) ? smem[lane] : 0.0f;
        v = warp_reduce_sum(v);
    }
    return v;
}

__global__ void sq_diff_partial_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ partial, int64_t n, bool vec) {
    __shared__ float smem[32];
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    float acc = 0.0f;
    int64_t done = 0;
    if (vec) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        const int64_t n4 = n >> 2;
        for (int64_t i = tid; i < n4; i += stride) {
            const float4 p = a4[i];
            const float4 q = b4[i];
            const float dx = p.x - q.x, dy = p.y - q.y, dz = p.z - q.z, dw = p.w - q.w;
            acc += (dx * dx + dy * dy) + (dz * dz + dw * dw);
        }
        done = n4 << 2;
    }
    for (int64_t i = done + tid; i < n; i += stride) {
        const float d = a[i] - b[i];
        acc += d * d;
    }
    acc = block_reduce_sum(acc, smem);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void finish_mean_kernel(const float* __restrict__ partial, int n_partial, float* __restrict__ out,
                                   int64_t n) {
    __shared__ float smem[32];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n_partial; i += blockDim.x) acc += partial[i];
    acc = block_reduce_sum(acc, smem);
    if (threadIdx.x == 0) out[0] = (float)((double)acc / (double)n);
}

torch::Tensor mse_loss_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(a.sizes() == b.sizes(), "inputs must have the same shape");
    const at::cuda::OptionalCUDAGuard guard(device_of(a));
    a = a.contiguous();
    b = b.contiguous();
    auto out = torch::empty({}, a.options());
    const int64_t n = a.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>((n + threads * 4 - 1) / (threads * 4), (int64_t)sms * 8));
    auto partial = torch::empty({blocks}, a.options());
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    const bool vec = (reinterpret_cast<uintptr_t>(pa) % 16 == 0) && (reinterpret_cast<uintptr_t>(pb) % 16 == 0);
    sq_diff_partial_kernel<<<blocks, threads, 0, stream>>>(pa, pb, partial.data_ptr<float>(), n, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // n == 0 gives 0 / 0 = NaN, like torch.
    finish_mean_kernel<<<1, 1024, 0, stream>>>(partial.data_ptr<float>(), blocks, out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor mse_loss_cuda(torch::Tensor a, torch::Tensor b);
"""

mse_loss_ext = load_inline(
    name="suite_mse_loss",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["mse_loss_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mse_loss_ext.mse_loss_cuda(predictions, targets)
