"""Solution for the max_pool2d task (kernel 2, stride 2, no padding, floor mode).

One thread per output element, grid-stride over the flattened [N*C, OH, OW]
output. Each thread reads its 2x2 window as two float2 loads when W is even
(every window then starts at an even, 8-byte aligned offset), else as four
scalar loads. NaN propagates like PyTorch's max pooling.
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

// max that propagates NaN (like torch): b wins if it is larger or NaN.
__device__ __forceinline__ float nan_max(float a, float b) {
    return (b > a || b != b) ? b : a;
}

template <bool VEC>
__global__ void max_pool2x2_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW) {
    const int64_t total = planes * OH * OW;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const int64_t ow = idx % OW;
        const int64_t t = idx / OW;
        const int64_t oh = t % OH;
        const int64_t p = t / OH;
        const float* base = x + p * H * W + (2 * oh) * W + 2 * ow;
        float m;
        if (VEC) {
            const float2 a = *reinterpret_cast<const float2*>(base);
            const float2 b = *reinterpret_cast<const float2*>(base + W);
            m = nan_max(nan_max(nan_max(a.x, a.y), b.x), b.y);
        } else {
            m = nan_max(nan_max(nan_max(base[0], base[1]), base[W]), base[W + 1]);
        }
        y[idx] = m;
    }
}

torch::Tensor max_pool2d_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() == 4, "input must be NCHW");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    const int64_t Nb = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    TORCH_CHECK(H >= 2 && W >= 2, "input is smaller than the 2x2 window");
    const int64_t OH = H / 2, OW = W / 2;
    auto y = torch::empty({Nb, C, OH, OW}, x.options());
    const int64_t total = Nb * C * OH * OW;
    if (total == 0) return y;

    const float* px = x.data_ptr<float>();
    const bool vec = (W % 2 == 0) && (reinterpret_cast<uintptr_t>(px) % 8 == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((total + threads - 1) / threads, 1 << 20);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) max_pool2x2_kernel<true><<<blocks, threads, 0, stream>>>(px, y.data_ptr<float>(), Nb * C, H, W, OH, OW);
    else max_pool2x2_kernel<false><<<blocks, threads, 0, stream>>>(px, y.data_ptr<float>(), Nb * C, H, W, OH, OW);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor max_pool2d_cuda(torch::Tensor x);
"""

max_pool2d_ext = load_inline(
    name="suite_max_pool2d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["max_pool2d_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool2d_ext.max_pool2d_cuda(x)
