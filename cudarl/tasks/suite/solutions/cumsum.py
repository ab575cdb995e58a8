"""Solution for the cumsum task: inclusive prefix sum along the last dim.

One 256-thread block per row (grid-stride over rows). The row is processed in
tiles of 1024 elements: each thread loads 4 consecutive elements (one float4
when rows are 16-byte aligned), scans them sequentially, then the thread
totals are scanned with warp shuffles and once more across the 8 warps
through shared memory. A running carry (the sum of all earlier tiles) is added
to every element. Rounding is that of a blocked scan, well within the task's
tolerance.
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

constexpr int THREADS = 256;
constexpr int ITEMS = 4;
constexpr int TILE = THREADS * ITEMS;
constexpr int WARPS = THREADS / 32;

template <bool VEC>
__global__ void __launch_bounds__(THREADS) cumsum_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                         int64_t rows, int64_t cols) {
    __shared__ float warp_tot[WARPS];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        float carry = 0.0f;  // sum of all earlier tiles of this row, identical in every thread
        for (int64_t t0 = 0; t0 < cols; t0 += TILE) {
            const int64_t base = t0 + (int64_t)threadIdx.x * ITEMS;
            float v[ITEMS];
            if (VEC && base + ITEMS <= cols) {
                const float4 q = *reinterpret_cast<const float4*>(xr + base);
                v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
            } else {
                #pragma unroll
                for (int k = 0; k < ITEMS; ++k) v[k] = (base + k < cols) ? xr[base + k] : 0.0f;
            }
            #pragma unroll
            for (int k = 1; k < ITEMS; ++k) v[k] += v[k - 1];
            const float total = v[ITEMS - 1];

            // Inclusive scan of the thread totals within the warp.
            float incl = total;
            #pragma unroll
            for (int offset = 1; offset < 32; offset <<= 1) {
                const float n = __shfl_up_sync(0xffffffffu, incl, offset);
                if (lane >= offset) incl += n;
            }
            if (lane == 31) warp_tot[warp] = incl;
            __syncthreads();
            // Exclusive prefix over the warps (WARPS is small: a plain loop).
            float warp_prefix = 0.0f, tile_total = 0.0f;
            #pragma unroll
            for (int w = 0; w < WARPS; ++w) {
                const float s = warp_tot[w];
                if (w < warp) warp_prefix += s;
                tile_total += s;
            }
            __syncthreads();  // warp_tot is rewritten by the next tile

            // Exclusive prefix within the warp: the previous lane's inclusive value.
            float excl = __shfl_up_sync(0xffffffffu, incl, 1);
            if (lane == 0) excl = 0.0f;
            const float add = carry + (warp_prefix + excl);
            if (VEC && base + ITEMS <= cols) {
                float4 q;
                q.x = v[0] + add; q.y = v[1] + add; q.z = v[2] + add; q.w = v[3] + add;
                *reinterpret_cast<float4*>(yr + base) = q;
            } else {
                #pragma unroll
                for (int k = 0; k < ITEMS; ++k)
                    if (base + k < cols) yr[base + k] = v[k] + add;
            }
            carry += tile_total;
        }
    }
}

torch::Tensor cumsum_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "input must be float32");
    TORCH_CHECK(x.dim() >= 1, "input must have at least one dimension");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols > 0 ? x.numel() / cols : 0;
    if (rows == 0 || cols == 0) return y;

    const float* px = x.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(py) % 16 == 0);
    const int blocks = (int)std::min<int64_t>(rows, 65535);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) cumsum_kernel<true><<<blocks, THREADS, 0, stream>>>(px, py, rows, cols);
    else cumsum_kernel<false><<<blocks, THREADS, 0, stream>>>(px, py, rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor cumsum_cuda(torch::Tensor x);
"""

cumsum_ext = load_inline(
    name="suite_cumsum",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["cumsum_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cumsum_ext.cumsum_cuda(x)
