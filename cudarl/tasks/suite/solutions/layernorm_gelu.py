"""Solution for the layernorm_gelu task: gelu(LayerNorm(x)) in bfloat16, in one kernel.

One 256-thread block per row (grid-stride over rows). Pass 1 loads the row (8
bfloat16 per 16-byte load when rows are 16-byte aligned), converts it to float32
into shared memory and sums it; pass 2 sums squared deviations from the mean (exact
two-pass variance, biased like torch); pass 3 writes gelu(y) with
y = (x - mean) * rstd * weight + bias. The reference runs LayerNorm and GELU as two
kernels with a bfloat16 tensor in between (two full round trips through memory);
here x is read once and the output written once. To match the reference's
rounding, y is rounded to bfloat16 before the exact (erf) GELU, whose result is
rounded to bfloat16 once on store. Any row count and width works (the float copy
of a row lives in shared memory when it fits, otherwise the row is re-read).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>

constexpr int LN_THREADS = 256;
typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float warp_reduce_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Block-wide sum, returned to every thread; red holds >= 33 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();  // earlier readers of red are done
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = (lane < (int)(blockDim.x >> 5)) ? red[lane] : 0.0f;
        t = warp_reduce_sum(t);
        if (lane == 0) red[32] = t;
    }
    __syncthreads();
    return red[32];
}

__device__ __forceinline__ float gelu_erf(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

// gelu(bf16(LayerNorm value)): the reference hands LayerNorm's bfloat16 output to GELU.
__device__ __forceinline__ float ln_gelu(float xv, float mean, float rstd, float wv, float bv) {
    const float yv = __bfloat162float(__float2bfloat16_rn((xv - mean) * rstd * wv + bv));
    return gelu_erf(yv);
}

__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    #pragma unroll
    for (int t = 0; t < 4; ++t) {
        const float2 p = __bfloat1622float2(h[t]);
        f[2 * t] = p.x;
        f[2 * t + 1] = p.y;
    }
}

__device__ __forceinline__ uint4 pack8(const float* f) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
    #pragma unroll
    for (int t = 0; t < 4; ++t) h[t] = __floats2bfloat162_rn(f[2 * t], f[2 * t + 1]);
    return u;
}

// VEC: cols % 8 == 0 and all pointers 16-byte aligned (implies CACHED).
// CACHED: the row's float copy lives in dynamic shared memory (cols floats). Each thread
// reads back only the entries it wrote itself, so the cache needs no extra barriers.
template <bool VEC, bool CACHED>
__global__ void __launch_bounds__(LN_THREADS)
layernorm_gelu_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, const bf16* __restrict__ b,
                      bf16* __restrict__ y, const int64_t rows, const int64_t cols, const float eps) {
    extern __shared__ float4 cache4[];
    float* const cache = reinterpret_cast<float*>(cache4);
    __shared__ float red[33];
    const int tid = threadIdx.x;
    const float inv_cols = 1.0f / (float)cols;
    const int64_t n8 = cols / 8;

    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const bf16* xr = x + row * cols;
        bf16* yr = y + row * cols;

        float s = 0.0f;
        if (VEC) {
            for (int64_t i = tid; i < n8; i += LN_THREADS) {
                float f[8];
                unpack8(__ldg(reinterpret_cast<const uint4*>(xr) + i), f);
                #pragma unroll
                for (int c = 0; c < 8; ++c) s += f[c];
                cache4[2 * i] = make_float4(f[0], f[1], f[2], f[3]);
                cache4[2 * i + 1] = make_float4(f[4], f[5], f[6], f[7]);
            }
        } else {
            for (int64_t j = tid; j < cols; j += LN_THREADS) {
                const float f = __bfloat162float(xr[j]);
                s += f;
                if (CACHED) cache[j] = f;
            }
        }
        const float mean = block_sum(s, red) * inv_cols;

        float sq = 0.0f;
        if (VEC) {
            for (int64_t i = tid; i < n8; i += LN_THREADS) {
                const float4 p = cache4[2 * i], q = cache4[2 * i + 1];
                const float d[8] = {p.x - mean, p.y - mean, p.z - mean, p.w - mean,
                                    q.x - mean, q.y - mean, q.z - mean, q.w - mean};
                #pragma unroll
                for (int c = 0; c < 8; ++c) sq = fmaf(d[c], d[c], sq);
            }
        } else {
            for (int64_t j = tid; j < cols; j += LN_THREADS) {
                const float d = (CACHED ? cache[j] : __bfloat162float(xr[j])) - mean;
                sq = fmaf(d, d, sq);
            }
        }
        const float rstd = rsqrtf(block_sum(sq, red) * inv_cols + eps);

        if (VEC) {
            for (int64_t i = tid; i < n8; i += LN_THREADS) {
                const float4 p = cache4[2 * i], q = cache4[2 * i + 1];
                const float xv[8] = {p.x, p.y, p.z, p.w, q.x, q.y, q.z, q.w};
                float wv[8], bv[8], out[8];
                unpack8(__ldg(reinterpret_cast<const uint4*>(w) + i), wv);
                unpack8(__ldg(reinterpret_cast<const uint4*>(b) + i), bv);
                #pragma unroll
                for (int c = 0; c < 8; ++c) out[c] = ln_gelu(xv[c], mean, rstd, wv[c], bv[c]);
                reinterpret_cast<uint4*>(yr)[i] = pack8(out);
            }
        } else {
            for (int64_t j = tid; j < cols; j += LN_THREADS) {
                const float xv = CACHED ? cache[j] : __bfloat162float(xr[j]);
                yr[j] = __float2bfloat16_rn(ln_gelu(xv, mean, rstd, __bfloat162float(w[j]), __bfloat162float(b[j])));
            }
        }
    }
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

torch::Tensor layernorm_gelu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && w.scalar_type() == torch::kBFloat16 &&
                b.scalar_type() == torch::kBFloat16, "inputs must be bfloat16");
    const int64_t cols = w.numel();
    TORCH_CHECK(b.numel() == cols && cols > 0 && x.numel() % cols == 0, "input does not match normalized_shape");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    w = w.contiguous();
    b = b.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.numel() / cols;
    if (rows == 0) return y;

    const bf16* xp = reinterpret_cast<const bf16*>(x.data_ptr());
    const bf16* wp = reinterpret_cast<const bf16*>(w.data_ptr());
    const bf16* bp = reinterpret_cast<const bf16*>(b.data_ptr());
    bf16* yp = reinterpret_cast<bf16*>(y.data_ptr());
    const int blocks = (int)std::min<int64_t>(rows, 1 << 20);
    const auto stream = at::cuda::getCurrentCUDAStream();
    const size_t smem = (size_t)cols * sizeof(float);
    const size_t smem_limit = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin - 1024;
    const bool vec = cols % 8 == 0 && aligned16(xp) && aligned16(wp) && aligned16(bp) && aligned16(yp);

    if (smem <= smem_limit) {
        if (vec) {
            auto kernel = layernorm_gelu_kernel<true, true>;
            if (smem > 48 * 1024)
                C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            kernel<<<blocks, LN_THREADS, smem, stream>>>(xp, wp, bp, yp, rows, cols, (float)eps);
        } else {
            auto kernel = layernorm_gelu_kernel<false, true>;
            if (smem > 48 * 1024)
                C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            kernel<<<blocks, LN_THREADS, smem, stream>>>(xp, wp, bp, yp, rows, cols, (float)eps);
        }
    } else {  // very wide rows: re-read the row from global memory instead of caching it
        layernorm_gelu_kernel<false, false><<<blocks, LN_THREADS, 0, stream>>>(xp, wp, bp, yp, rows, cols, (float)eps);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor layernorm_gelu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);
"""

ext = load_inline(
    name="suite_layernorm_gelu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layernorm_gelu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, dtype=torch.bfloat16)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise ValueError(f"input shape {tuple(x.shape)} does not end with {shape}")
        return ext.layernorm_gelu_cuda(x, self.ln.weight, self.ln.bias, float(self.ln.eps))
