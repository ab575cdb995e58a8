"""Honest solution for the suite task mul_broadcast_col.

out[r, c] = x[r, c] * y[r, 0]. The grid is 2-D: blockIdx.y strides over rows (each block
loads its row's factor once) and blockIdx.x/threadIdx.x over the columns of a row. Rows
whose length is a multiple of 4 are processed as float4 when the pointers are 16-byte
aligned; otherwise a scalar kernel handles any row length.
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

__global__ void mul_col_vec4_kernel(const float4* __restrict__ x,
                                    const float* __restrict__ y,
                                    float4* __restrict__ out,
                                    int64_t rows, int64_t cols4) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float s = __ldg(y + r);
        const float4* xr = x + r * cols4;
        float4* orow = out + r * cols4;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols4;
             c += (int64_t)blockDim.x * gridDim.x) {
            const float4 v = xr[c];
            orow[c] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
        }
    }
}

__global__ void mul_col_scalar_kernel(const float* __restrict__ x,
                                      const float* __restrict__ y,
                                      float* __restrict__ out,
                                      int64_t rows, int64_t cols) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float s = __ldg(y + r);
        const float* xr = x + r * cols;
        float* orow = out + r * cols;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += (int64_t)blockDim.x * gridDim.x) {
            orow[c] = xr[c] * s;
        }
    }
}

static bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Column blocks cover one row (at most 64 of them); rows fill the rest of ~32 blocks per SM.
static dim3 grid_for(int64_t rows, int64_t cols, int threads) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t gx = std::max<int64_t>(1, std::min<int64_t>((cols + threads - 1) / threads, 64));
    const int64_t want_y = std::max<int64_t>(1, ((int64_t)sms * 32) / gx);
    const int64_t gy = std::max<int64_t>(1, std::min<int64_t>({rows, want_y, (int64_t)65535}));
    return dim3((unsigned)gx, (unsigned)gy, 1);
}

torch::Tensor mul_broadcast_col_cuda(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    TORCH_CHECK(x.dim() == 2 && y.dim() == 2 && y.size(0) == x.size(0) && y.size(1) == 1,
                "expected x [M, N] and y [M, 1]");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    y = y.contiguous();
    auto out = torch::empty_like(x);
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    if (rows == 0 || cols == 0) return out;

    const float* px = x.data_ptr<float>();
    const float* py = y.data_ptr<float>();
    float* po = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    if (cols % 4 == 0 && aligned16(px) && aligned16(po)) {
        const int64_t cols4 = cols / 4;
        mul_col_vec4_kernel<<<grid_for(rows, cols4, threads), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(px), py, reinterpret_cast<float4*>(po), rows, cols4);
    } else {
        mul_col_scalar_kernel<<<grid_for(rows, cols, threads), threads, 0, stream>>>(
            px, py, po, rows, cols);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor mul_broadcast_col_cuda(torch::Tensor x, torch::Tensor y);
"""

mul_broadcast_col_ext = load_inline(
    name="suite_mul_broadcast_col",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["mul_broadcast_col_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return mul_broadcast_col_ext.mul_broadcast_col_cuda(x, y)
