"""Honest: fp32 softmax in a different order from torch's: one pass keeps a running (max, sum)
pair per thread, rescaling the sum whenever the max grows (the "online" softmax), and the pairs
are merged across a warp and then across warps. Its outputs (about 1/1700 on this task) differ
from the reference by a few fp32 ulps; a flat absolute tolerance would also let all-zeros
through, and a tolerance scaled to the output's size must still pass this.

expect: passed
reason:
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>
#include <math_constants.h>

// Merges the pair (m2, s2) into (m, s): s is a sum of exp(x - m) over the elements seen.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float top = fmaxf(m, m2);
    if (top == -CUDART_INF_F) return;  // both empty
    s = s * expf(m - top) + s2 * expf(m2 - top);
    m = top;
}

constexpr int THREADS = 128;

__global__ void __launch_bounds__(THREADS) online_softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                                 int64_t rows, int64_t cols) {
    __shared__ float part_m[THREADS / 32], part_s[THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        float m = -CUDART_INF_F, s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) {
            const float v = xr[j];
            if (v > m) {
                s = s * expf(m - v) + 1.0f;
                m = v;
            } else {
                s += expf(v - m);
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float m2 = __shfl_down_sync(0xffffffffu, m, offset);
            const float s2 = __shfl_down_sync(0xffffffffu, s, offset);
            merge(m, s, m2, s2);
        }
        if (lane == 0) {
            part_m[warp] = m;
            part_s[warp] = s;
        }
        __syncthreads();
        float row_m = part_m[0], row_s = part_s[0];
        for (int w = 1; w < THREADS / 32; ++w) merge(row_m, row_s, part_m[w], part_s[w]);
        const float inv = 1.0f / row_s;
        for (int64_t j = threadIdx.x; j < cols; j += THREADS) yr[j] = expf(xr[j] - row_m) * inv;
        __syncthreads();  // part_m / part_s are reused by the next row
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
    online_softmax_kernel<<<blocks, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
cpp_source = "torch::Tensor softmax_rows(torch::Tensor x);"
ext = load_inline(name="cudarl_fair_online_softmax", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["softmax_rows"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_rows(x)
