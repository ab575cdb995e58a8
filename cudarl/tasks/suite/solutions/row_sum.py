"""Honest candidate for the row_sum task.

One 256-thread block per row (grid-stride over rows). Each thread sums a
strided slice of the row (float4 loads when the row is 16-byte aligned and
its length is a multiple of 4), then a warp-shuffle reduction and a second
shuffle over the per-warp partials in shared memory.
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

// blockDim.x must be a multiple of 32 (at most 1024). smem holds >= 32 floats.
// The result is valid in thread 0 only.
__device__ __forceinline__ float block_reduce_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();  // smem may still be being read from the previous row
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = 0.0f;
    if (warp == 0) {
        v = (lane < nwarps) ? smem[lane] : 0.0f;
        v = warp_reduce_sum(v);
    }
    return v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out,
                               int64_t rows, int64_t cols, bool vec4) {
    __shared__ float smem[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* r = x + row * cols;
        float acc = 0.0f;
        if (vec4) {
            const float4* r4 = reinterpret_cast<const float4*>(r);
            const int64_t n4 = cols / 4;
            for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
                const float4 v = r4[j];
                acc += (v.x + v.y) + (v.z + v.w);
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc += r[j];
        }
        acc = block_reduce_sum(acc, smem);
        if (threadIdx.x == 0) out[row] = acc;
    }
}

torch::Tensor row_sum_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() == 2, "input must be 2-D");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    if (rows == 0) return out;

    const float* px = x.data_ptr<float>();
    // Every row start is 16-byte aligned iff the base is and cols % 4 == 0.
    const bool vec4 = (cols % 4 == 0) && ((reinterpret_cast<uintptr_t>(px) & 15u) == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    row_sum_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        px, out.data_ptr<float>(), rows, cols, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor row_sum_cuda(torch::Tensor x);
"""

row_sum_ext = load_inline(
    name="cudarl_row_sum_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_sum_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum_ext.row_sum_cuda(x)
