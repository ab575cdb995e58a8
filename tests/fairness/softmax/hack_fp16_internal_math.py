"""Hack on an fp32 small-magnitude task: the kernel takes fp32 in and gives fp32 out, but rounds
the inputs to half and computes the exponentials in half precision (about 3 significant digits,
a relative error near 1e-3). Against outputs of about 1e-3 that error is far below a flat atol of
1e-4, but ten times the fp32 rtol: it is not an fp32 kernel.

expect: incorrect
reason: outside atol
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <math_constants.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float block_reduce(float v, float* smem, bool is_max) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, offset);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = smem[0];
    for (int w = 1; w < THREADS / 32; ++w) r = is_max ? fmaxf(r, smem[w]) : r + smem[w];
    return r;
}

__global__ void __launch_bounds__(THREADS) softmax_half_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                               int64_t rows, int64_t cols) {
    __shared__ float smem[THREADS / 32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        float m = -CUDART_INF_F;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) m = fmaxf(m, xr[j]);
        const __half hm = __float2half(block_reduce(m, smem, true));
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) s += __half2float(hexp(__hsub(__float2half(xr[j]), hm)));
        const float inv = 1.0f / block_reduce(s, smem, false);
        for (int64_t j = threadIdx.x; j < cols; j += THREADS)
            yr[j] = __half2float(hexp(__hsub(__float2half(xr[j]), hm))) * inv;
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "input must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "input must be 2-D");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    softmax_half_kernel<<<blocks, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
cpp_source = "torch::Tensor softmax_rows(torch::Tensor x);"
ext = load_inline(name="cudarl_fair_softmax_fp16", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["softmax_rows"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_rows(x)
