"""Honest candidate for the layer_norm task.

LayerNorm over the trailing normalized_shape dims, with the module's own
weight, bias and eps. One 256-thread block per row (grid-stride over rows);
mean and biased variance are computed in two passes (sum, then sum of
squared deviations), each with a warp-shuffle block reduction, then a third
pass writes (x - mean) * rstd * weight + bias.
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

// blockDim.x must be a multiple of 32 (at most 1024); smem holds >= 33 floats.
// The result is returned to every thread of the block.
__device__ __forceinline__ float block_reduce_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();  // previous users of smem are done reading it
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = (lane < nwarps) ? smem[lane] : 0.0f;
        t = warp_reduce_sum(t);
        if (lane == 0) smem[32] = t;
    }
    __syncthreads();
    return smem[32];
}

__global__ void layer_norm_kernel(const float* __restrict__ x,
                                  const float* __restrict__ weight,
                                  const float* __restrict__ bias,
                                  float* __restrict__ y,
                                  int64_t rows, int64_t cols, float eps) {
    __shared__ float smem[33];
    const float inv_cols = 1.0f / (float)cols;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;

        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
        const float mean = block_reduce_sum(s, smem) * inv_cols;

        float sq = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            const float d = xr[j] - mean;
            sq += d * d;
        }
        const float var = block_reduce_sum(sq, smem) * inv_cols;  // biased, like torch
        const float rstd = 1.0f / sqrtf(var + eps);

        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            yr[j] = (xr[j] - mean) * rstd * weight[j] + bias[j];
    }
}

torch::Tensor layer_norm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "inputs must be float32");
    const int64_t cols = weight.numel();
    TORCH_CHECK(bias.numel() == cols, "weight and bias must have the same number of elements");
    TORCH_CHECK(cols > 0 && x.numel() % cols == 0, "input does not match normalized_shape");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.numel() / cols;
    if (rows == 0) return y;

    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    layer_norm_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
        y.data_ptr<float>(), rows, cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor layer_norm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);
"""

layer_norm_ext = load_inline(
    name="cudarl_layer_norm_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layer_norm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise ValueError(f"input shape {tuple(x.shape)} does not end with {shape}")
        weight = self.ln.weight
        bias = self.ln.bias
        if weight is None:  # elementwise_affine=False
            weight = torch.ones(shape, device=x.device, dtype=x.dtype)
        if bias is None:  # bias=False
            bias = torch.zeros(shape, device=x.device, dtype=x.dtype)
        return layer_norm_ext.layer_norm_cuda(x, weight.detach(), bias.detach(), float(self.ln.eps))
