"""Solution for the avg_pool2d task (kernel 3, stride 2, padding 1,
count_include_pad=True, ceil_mode=False).

One thread per output element, grid-stride over the flattened
[N*C, OH, OW] output. The 3x3 window is clipped to the image; the padded
zeros still count, so every window is divided by 9 (with ceil_mode off no
window reaches past the padding). Summation order matches PyTorch's
(row by row, left to right).
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

constexpr int K = 3, S = 2, P = 1;

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

__global__ void avg_pool3s2p1_kernel(const float* __restrict__ x, float* __restrict__ y,
                                     int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW) {
    const int64_t total = planes * OH * OW;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const int64_t ow = idx % OW;
        const int64_t t = idx / OW;
        const int64_t oh = t % OH;
        const int64_t p = t / OH;
        const int64_t h0 = oh * S - P, w0 = ow * S - P;
        // Window size with the padding counted, as torch computes it (clipped to H + P).
        const int64_t pool = (imin(h0 + K, H + P) - h0) * (imin(w0 + K, W + P) - w0);
        const int64_t hs = imax(h0, 0), he = imin(h0 + K, H);
        const int64_t ws = imax(w0, 0), we = imin(w0 + K, W);
        const float* plane = x + p * H * W;
        float acc = 0.0f;
        for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) acc += plane[h * W + w];
        y[idx] = acc / (float)pool;
    }
}

torch::Tensor avg_pool2d_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() == 4, "input must be NCHW");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    const int64_t Nb = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    TORCH_CHECK(H + 2 * P >= K && W + 2 * P >= K, "input is smaller than the window");
    const int64_t OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    auto y = torch::empty({Nb, C, OH, OW}, x.options());
    const int64_t total = Nb * C * OH * OW;
    if (total == 0) return y;

    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((total + threads - 1) / threads, 1 << 20);
    avg_pool3s2p1_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), Nb * C, H, W, OH, OW);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor avg_pool2d_cuda(torch::Tensor x);
"""

avg_pool2d_ext = load_inline(
    name="suite_avg_pool2d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["avg_pool2d_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return avg_pool2d_ext.avg_pool2d_cuda(x)
