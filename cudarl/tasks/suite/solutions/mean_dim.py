"""Solution for the mean_dim task: x.mean(dim=-1).

One 256-thread block per row of the flattened [rows, N] view (grid-stride over
rows). Each thread sums a strided slice (float4 loads when rows are 16-byte
aligned), a two-level warp-shuffle reduction adds the partials and thread 0
writes sum / N.
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
#include <vector>

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

template <bool VEC>
__global__ void mean_last_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    __shared__ float smem[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* r = x + row * cols;
        float acc = 0.0f;
        if (VEC) {
            const float4* r4 = reinterpret_cast<const float4*>(r);
            const int64_t n4 = cols >> 2;
            for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
                const float4 v = r4[j];
                acc += (v.x + v.y) + (v.z + v.w);
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc += r[j];
        }
        acc = block_reduce_sum(acc, smem);
        if (threadIdx.x == 0) out[row] = acc / (float)cols;
    }
}

torch::Tensor mean_dim_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() >= 1, "input must have at least one dimension");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    const int64_t cols = x.size(-1);
    std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end() - 1);
    auto out = torch::empty(out_shape, x.options());
    const int64_t rows = out.numel();
    if (rows == 0) return out;
    TORCH_CHECK(cols > 0, "mean over an empty dimension");

    const float* px = x.data_ptr<float>();
    const bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) mean_last_kernel<true><<<blocks, threads, 0, stream>>>(px, out.data_ptr<float>(), rows, cols);
    else mean_last_kernel<false><<<blocks, threads, 0, stream>>>(px, out.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor mean_dim_cuda(torch::Tensor x);
"""

mean_dim_ext = load_inline(
    name="suite_mean_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["mean_dim_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mean_dim_ext.mean_dim_cuda(x)
