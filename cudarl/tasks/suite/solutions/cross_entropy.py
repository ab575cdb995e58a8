"""Solution for the cross_entropy task: mean over rows of logsumexp(x_i) - x_i[t_i].

First kernel: a few 256-thread blocks per SM, each grid-striding over rows.
For a row, every thread keeps an online (max, sum of exp(x - max)) pair over
its strided slice (float4 loads when rows are 16-byte aligned); the pairs are
merged across the block, and thread 0 adds logsumexp - x[target] to the
block's running loss and count. Targets equal to ignore_index (-100) are
skipped like PyTorch; other out-of-range targets make the loss NaN (PyTorch
raises). Second kernel: one block adds the per-block partials and divides by
the number of counted rows. Deterministic (no atomics).
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
#include <cmath>
#include <cstdint>

__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) { m = m2; s = s2; return; }
    if (m2 > m) {
        s = s * expf(m - m2) + s2;
        m = m2;
    } else {
        s += s2 * expf(m2 - m);
    }
}

// Block-wide merge of (m, s); blockDim.x a multiple of 32; the result is valid in thread 0.
__device__ __forceinline__ void block_reduce_ms(float& m, float& s, float* sm, float* ss) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        ms_merge(m, s, m2, s2);
    }
    __syncthreads();
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = (lane < nwarps) ? sm[lane] : -INFINITY;
        s = (lane < nwarps) ? ss[lane] : 0.0f;
        #pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
            const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
            ms_merge(m, s, m2, s2);
        }
    }
}

template <bool VEC>
__global__ void ce_rows_kernel(const float* __restrict__ x, const int64_t* __restrict__ target,
                               float* __restrict__ partial_loss, float* __restrict__ partial_count,
                               int64_t rows, int64_t cols, int64_t ignore_index) {
    __shared__ float sm[32];
    __shared__ float ss[32];
    float block_loss = 0.0f, block_count = 0.0f;  // meaningful in thread 0 only
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t t = target[row];  // uniform across the block
        if (t == ignore_index) continue;
        const float* xr = x + row * cols;
        float m = -INFINITY, s = 0.0f;
        if (VEC) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const int64_t n4 = cols >> 2;
            for (int64_t j = threadIdx.x; j < n4; j += blockDim.x) {
                const float4 v = x4[j];
                const float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
                if (vm > m) {
                    s *= expf(m - vm);
                    m = vm;
                }
                s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
                const float v = xr[j];
                if (v > m) {
                    s = s * expf(m - v) + 1.0f;
                    m = v;
                } else {
                    s += expf(v - m);
                }
            }
        }
        block_reduce_ms(m, s, sm, ss);
        if (threadIdx.x == 0) {
            const float xt = (t >= 0 && t < cols) ? xr[t] : NAN;
            block_loss += (m + logf(s)) - xt;
            block_count += 1.0f;
        }
    }
    if (threadIdx.x == 0) {
        partial_loss[blockIdx.x] = block_loss;
        partial_count[blockIdx.x] = block_count;
    }
}

__global__ void ce_finish_kernel(const float* __restrict__ partial_loss, const float* __restrict__ partial_count,
                                 int n_partial, float* __restrict__ out) {
    __shared__ float sl[32];
    __shared__ float sc[32];
    float l = 0.0f, c = 0.0f;
    for (int i = threadIdx.x; i < n_partial; i += blockDim.x) {
        l += partial_loss[i];
        c += partial_count[i];
    }
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        l += __shfl_xor_sync(0xffffffffu, l, offset);
        c += __shfl_xor_sync(0xffffffffu, c, offset);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) { sl[warp] = l; sc[warp] = c; }
    __syncthreads();
    if (warp == 0) {
        l = (lane < nwarps) ? sl[lane] : 0.0f;
        c = (lane < nwarps) ? sc[lane] : 0.0f;
        #pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            l += __shfl_xor_sync(0xffffffffu, l, offset);
            c += __shfl_xor_sync(0xffffffffu, c, offset);
        }
        if (lane == 0) out[0] = l / c;  // no counted rows: 0 / 0 = NaN, like torch
    }
}

torch::Tensor cross_entropy_cuda(torch::Tensor logits, torch::Tensor target, int64_t ignore_index) {
    TORCH_CHECK(logits.is_cuda() && target.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(logits.scalar_type() == torch::kFloat32, "logits must be float32");
    TORCH_CHECK(target.scalar_type() == torch::kInt64, "targets must be int64");
    TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
                "expected logits [B, C] and targets [B]");
    const at::cuda::OptionalCUDAGuard guard(device_of(logits));
    logits = logits.contiguous();
    target = target.contiguous();
    const int64_t rows = logits.size(0), cols = logits.size(1);
    TORCH_CHECK(cols > 0, "no classes");
    auto out = torch::empty({}, logits.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>(rows, (int64_t)sms * 8));
    auto partial = torch::empty({2, blocks}, logits.options());
    float* ploss = partial.data_ptr<float>();
    float* pcount = ploss + blocks;
    const float* px = logits.data_ptr<float>();
    const bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0);
    if (vec) ce_rows_kernel<true><<<blocks, threads, 0, stream>>>(px, target.data_ptr<int64_t>(), ploss, pcount, rows, cols, ignore_index);
    else ce_rows_kernel<false><<<blocks, threads, 0, stream>>>(px, target.data_ptr<int64_t>(), ploss, pcount, rows, cols, ignore_index);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    ce_finish_kernel<<<1, 1024, 0, stream>>>(ploss, pcount, blocks, out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor cross_entropy_cuda(torch::Tensor logits, torch::Tensor target, int64_t ignore_index);
"""

cross_entropy_ext = load_inline(
    name="suite_cross_entropy",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["cross_entropy_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cross_entropy_ext.cross_entropy_cuda(logits, targets, -100)
