"""Solution for the row_max task: x.max(dim=1).values.

One 256-thread block per row (grid-stride over rows). Each thread takes the
max of a strided slice (float4 loads when rows are 16-byte aligned), then a
warp-shuffle reduction and a second one over the per-warp results in shared
memory. NaN propagates like torch.max.
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
#include <cmath>
#include <cstdint>

// max that propagates NaN: b wins if it is larger or NaN.
__device__ __forceinline__ float nan_max(float a, float b) {
    return (b > a || b != b) ? b : a;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// blockDim.x a multiple of 32; smem holds >= 32 floats; the result is valid in thread 0.
__device__ __forceinline__ float block_reduce_max(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_max(v);
    __syncthreads();  // smem may still be read for the previous row
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = -INFINITY;
    if (warp == 0) {
        v = (lane < nwarps) ? smem[lane] : -INFINITY;
        v = warp_reduce_max(v);
    }
    return v;
}

template <bool VEC>
__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    __shared__ float smem[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* r = x + row * cols;
        float m = -INFINITY;
        if (VEC) {
            const float4* r4 = reinterpret_cast<const float4*>(r);
            const int64_t n4 = cols >> 2;
            for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
                const float4 v = r4[j];
                m = nan_max(nan_max(m, v.x), nan_max(v.y, nan_max(v.z, v.w)));
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = nan_max(m, r[j]);
        }
        m = block_reduce_max(m, smem);
        if (threadIdx.x == 0) out[row] = m;
    }
}

torch::Tensor row_max_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() == 2, "input must be 2-D");
    TORCH_CHECK(x.size(1) > 0, "cannot take the max of an empty row");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    if (rows == 0) return out;

    const float* px = x.data_ptr<float>();
    const bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) row_max_kernel<true><<<blocks, threads, 0, stream>>>(px, out.data_ptr<float>(), rows, cols);
    else row_max_kernel<false><<<blocks, threads, 0, stream>>>(px, out.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor row_max_cuda(torch::Tensor x);
"""

row_max_ext = load_inline(
    name="suite_row_max",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_max_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_max_ext.row_max_cuda(x)
