"""Solution for the depthwise_conv2d task: 3x3 depthwise convolution, padding 1, with bias.

Direct convolution through shared memory: each 256-thread block (32 x 8) produces a
32 x 32 tile of one (image, channel) plane. It first stages the 34 x 34 input tile
with its one-pixel halo (zeros outside the image) in shared memory with coalesced
loads, keeps the channel's nine weights and bias in registers, then each thread
computes four outputs of one column, so every input pixel is read from global
memory about 1.13 times instead of nine. float32 FMAs. Any batch, channel count and
spatial size works.
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
#include <cstdint>
#include <optional>

constexpr int TILE_W = 32;
constexpr int TILE_H = 32;
constexpr int THREADS_Y = 8;
constexpr int ROWS_PER_THREAD = TILE_H / THREADS_Y;  // 4

// grid: x = image * C + channel (one plane), y = tile row, z = tile column.
__global__ void __launch_bounds__(TILE_W * THREADS_Y)
depthwise3x3_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                    float* __restrict__ y, const int C, const int H, const int W) {
    __shared__ float tile[TILE_H + 2][TILE_W + 2];
    const int64_t plane = blockIdx.x;
    const int c = (int)(plane % C);
    const int oh0 = blockIdx.y * TILE_H;
    const int ow0 = blockIdx.z * TILE_W;
    const float* xp = x + plane * H * W;
    float* yp = y + plane * H * W;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TILE_W + tx;

    for (int e = tid; e < (TILE_H + 2) * (TILE_W + 2); e += TILE_W * THREADS_Y) {
        const int r = e / (TILE_W + 2), q = e % (TILE_W + 2);
        const int ih = oh0 - 1 + r, iw = ow0 - 1 + q;
        tile[r][q] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? __ldg(xp + (int64_t)ih * W + iw) : 0.0f;
    }
    float wk[9];
    #pragma unroll
    for (int i = 0; i < 9; ++i) wk[i] = __ldg(w + c * 9 + i);
    const float b = bias != nullptr ? __ldg(bias + c) : 0.0f;
    __syncthreads();

    const int ow = ow0 + tx;
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
        const int r = ty + THREADS_Y * i;
        const int oh = oh0 + r;
        if (oh < H && ow < W) {
            float acc = b;
            #pragma unroll
            for (int kh = 0; kh < 3; ++kh)
                #pragma unroll
                for (int kw = 0; kw < 3; ++kw) acc = fmaf(wk[kh * 3 + kw], tile[r + kh][tx + kw], acc);
            yp[(int64_t)oh * W + ow] = acc;
        }
    }
}

torch::Tensor depthwise3x3_cuda(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> b_opt) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(x.dim() == 4, "expected x [N, C, H, W]");
    const int64_t Nb = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    TORCH_CHECK(w.dim() == 4 && w.size(0) == C && w.size(1) == 1 && w.size(2) == 3 && w.size(3) == 3,
                "expected a depthwise weight [C, 1, 3, 3]");
    torch::Tensor b = b_opt.has_value() ? *b_opt : torch::Tensor();
    if (b.defined()) {
        TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32 && b.numel() == C, "bad bias");
        b = b.contiguous();
    }
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    w = w.contiguous();
    auto y = torch::empty_like(x);
    if (y.numel() == 0) return y;
    const int64_t tiles_h = (H + TILE_H - 1) / TILE_H, tiles_w = (W + TILE_W - 1) / TILE_W;
    TORCH_CHECK(Nb * C < (1LL << 31) && tiles_h <= 65535 && tiles_w <= 65535 && H * W < (1LL << 31),
                "problem too large for this kernel's grid");
    const dim3 grid((unsigned)(Nb * C), (unsigned)tiles_h, (unsigned)tiles_w);
    const dim3 block(TILE_W, THREADS_Y);
    depthwise3x3_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.defined() ? b.data_ptr<float>() : nullptr,
        y.data_ptr<float>(), (int)C, (int)H, (int)W);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
#include <optional>
torch::Tensor depthwise3x3_cuda(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> b_opt);
"""

ext = load_inline(
    name="suite_depthwise_conv2d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["depthwise3x3_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        if (c.stride != (1, 1) or c.dilation != (1, 1) or c.padding != (1, 1) or c.padding_mode != "zeros"
                or c.groups != c.in_channels or c.out_channels != c.in_channels):
            raise ValueError("this kernel implements a stride-1, zero-padding-1, 3x3 depthwise convolution only")
        return ext.depthwise3x3_cuda(x, c.weight, c.bias)
