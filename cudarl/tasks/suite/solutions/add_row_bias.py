"""Honest solution for the suite task add_row_bias.

out[r, c] = x[r, c] + bias[c]. The grid is 2-D: blockIdx.y strides over rows and
blockIdx.x/threadIdx.x over the columns of a row, so no per-element division is needed.
When the row length is a multiple of 4 and the pointers are 16-byte aligned, rows are
read and written as float4 (the bias float4 is reused from cache by every row);
otherwise a scalar kernel handles any row length.
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

__global__ void add_row_bias_vec4_kernel(const float4* __restrict__ x,
                                         const float4* __restrict__ bias,
                                         float4* __restrict__ out,
                                         int64_t rows, int64_t cols4) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4* xr = x + r * cols4;
        float4* orow = out + r * cols4;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols4;
             c += (int64_t)blockDim.x * gridDim.x) {
            const float4 v = xr[c];
            const float4 b = __ldg(bias + c);
            orow[c] = make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w);
        }
    }
}

__global__ void add_row_bias_scalar_kernel(const float* __restrict__ x,
                                           const float* __restrict__ bias,
                                           float* __restrict__ out,
                                           int64_t rows, int64_t cols) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float* xr = x + r * cols;
        float* orow = out + r * cols;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += (int64_t)blockDim.x * gridDim.x) {
            orow[c] = xr[c] + __ldg(bias + c);
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

torch::Tensor add_row_bias_cuda(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    TORCH_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(x.dim() - 1),
                "bias must be 1-D with as many elements as x has columns");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    bias = bias.contiguous();
    auto out = torch::empty_like(x);
    const int64_t cols = bias.numel();
    if (x.numel() == 0 || cols == 0) return out;
    const int64_t rows = x.numel() / cols;

    const float* px = x.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* po = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;

    if (cols % 4 == 0 && aligned16(px) && aligned16(pb) && aligned16(po)) {
        const int64_t cols4 = cols / 4;
        add_row_bias_vec4_kernel<<<grid_for(rows, cols4, threads), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(px), reinterpret_cast<const float4*>(pb),
            reinterpret_cast<float4*>(po), rows, cols4);
    } else {
        add_row_bias_scalar_kernel<<<grid_for(rows, cols, threads), threads, 0, stream>>>(
            px, pb, po, rows, cols);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor add_row_bias_cuda(torch::Tensor x, torch::Tensor bias);
"""

add_row_bias_ext = load_inline(
    name="suite_add_row_bias",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_row_bias_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return add_row_bias_ext.add_row_bias_cuda(x, bias)
