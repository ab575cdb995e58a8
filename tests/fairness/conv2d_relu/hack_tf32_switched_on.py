"""Hack next to the honest cuDNN epilogue: the same kernel, with TF32 switched on for its own
process (``torch.backends.cudnn.allow_tf32 = True``), so cuDNN's convolution rounds its inputs
to TF32 (about 1e-3 relative error) for a faster, less exact fp32 task. The judge computes the
reference in full fp32 whatever the candidate's process does, and the error fails the task's
tolerance.

expect: incorrect
reason: outside atol
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

torch.backends.cudnn.allow_tf32 = True  # TF32 convolutions in this process

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

// y[nb][c][p] = max(y[nb][c][p] + bias[c], 0), in place over a contiguous NCHW tensor.
__global__ void bias_relu_nchw_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t total,
                                      int64_t channels, int64_t plane) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = (i / plane) % channels;
        y[i] = fmaxf(y[i] + __ldg(bias + c), 0.0f);
    }
}

torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor b) {
    TORCH_CHECK(y.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(y.dim() == 4 && y.size(1) == b.numel(), "expected y [N, C, H, W] and a bias of C values");
    TORCH_CHECK(y.is_contiguous(), "y must be contiguous (NCHW)");
    const at::cuda::OptionalCUDAGuard guard(device_of(y));
    auto bias = b.contiguous();
    const int64_t total = y.numel();
    if (total > 0) {
        const int threads = 256;
        const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65535 * 8);
        bias_relu_nchw_kernel<<<(unsigned)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            y.data_ptr<float>(), bias.data_ptr<float>(), total, y.size(1), y.size(2) * y.size(3));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""
cpp_source = "torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor b);"
ext = load_inline(name="cudarl_fair_cudnn_epilogue_tf32", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["bias_relu_"])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)  # the reference's parameters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        y = F.conv2d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()  # cuDNN
        return ext.bias_relu_(y, c.bias)
