"""Solution for the attention task: softmax(Q K^T / sqrt(d)) V, non-causal, float32.

One fused flash-style kernel: each thread owns one query row (128 rows per block) and
keeps the scaled query and its output accumulator in registers; key and value tiles
are staged through shared memory and read as broadcast float4s; an online softmax in
the exp2 domain is rescaled once per chunk of 16 keys. The [seq, seq] score and
probability matrices the reference materialises (268 MB each at the default shape)
are never written. All arithmetic is float32 (no TF32). Any batch, head count and
sequence length works; head_dim up to 128 (tiles are zero-padded to 64 or 128).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cmath>
#include <cstdint>

// Flash-style attention forward: one query row per thread, 128 rows per block. Key and
// value tiles are staged through shared memory (zero-padded to DMAX columns, so any
// head dim D <= DMAX works); each thread keeps its scaled query row and its output
// accumulator in registers and runs an online softmax in the exp2 domain, rescaling
// once per chunk of 16 keys. Scores and probabilities are never written to memory.
// All arithmetic is float32; T is the storage type of q, k, v and the output.
constexpr int ATT_THREADS = 128;
constexpr int ATT_CHUNK = 16;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

template <typename T, int DMAX, bool CAUSAL>
__global__ void __launch_bounds__(ATT_THREADS)
flash_attn_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                  T* __restrict__ o, const int Sq, const int Sk, const int D, const float scale_log2e) {
    constexpr int BKEYS = DMAX <= 64 ? 64 : 4096 / DMAX;  // K + V tiles: 32 KB of shared memory
    constexpr int D4 = DMAX / 4;
    static_assert(DMAX % 4 == 0 && BKEYS % ATT_CHUNK == 0, "tile shape");
    __shared__ float4 Ks[BKEYS][D4];
    __shared__ float4 Vs[BKEYS][D4];
    float* const ks = reinterpret_cast<float*>(&Ks[0][0]);
    float* const vs = reinterpret_cast<float*>(&Vs[0][0]);

    const int tid = threadIdx.x;
    const int64_t bh = blockIdx.y;
    const int q0 = blockIdx.x * ATT_THREADS;
    const int qi = q0 + tid;
    const bool active = qi < Sq;
    const T* kp = k + bh * Sk * (int64_t)D;
    const T* vp = v + bh * Sk * (int64_t)D;

    float4 qr[D4], acc[D4];
    {
        const T* qp = q + (bh * Sq + (active ? qi : 0)) * (int64_t)D;
        #pragma unroll
        for (int d4 = 0; d4 < D4; ++d4) {
            float t[4];
            #pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int d = 4 * d4 + c;
                t[c] = (active && d < D) ? to_float(qp[d]) * scale_log2e : 0.0f;
            }
            qr[d4] = make_float4(t[0], t[1], t[2], t[3]);
            acc[d4] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    float m = -INFINITY;  // running max of the scores (log2 domain)
    float l = 0.0f;       // running sum of exp2(score - m)

    // Causal: no query of this block sees a key at or beyond q0 + ATT_THREADS.
    const int kend = CAUSAL ? min(Sk, q0 + ATT_THREADS) : Sk;
    for (int kt = 0; kt < kend; kt += BKEYS) {
        __syncthreads();  // the previous tile is no longer being read
        for (int e = tid; e < BKEYS * DMAX; e += ATT_THREADS) {
            const int j = e / DMAX, d = e % DMAX;
            const int gj = kt + j;
            float kv = 0.0f, vv = 0.0f;
            if (gj < Sk && d < D) {
                kv = to_float(kp[(int64_t)gj * D + d]);
                vv = to_float(vp[(int64_t)gj * D + d]);
            }
            ks[e] = kv;
            vs[e] = vv;
        }
        __syncthreads();

        int jmax = min(BKEYS, Sk - kt);             // keys of this tile that exist
        if (CAUSAL) jmax = min(jmax, qi - kt + 1);  // ... and that this query may see
        if (!active) jmax = 0;
        for (int j0 = 0; j0 < jmax; j0 += ATT_CHUNK) {
            float s[ATT_CHUNK];
            float cmax = -INFINITY;
            #pragma unroll
            for (int jj = 0; jj < ATT_CHUNK; ++jj) {
                float dot = 0.0f;
                #pragma unroll
                for (int d4 = 0; d4 < D4; ++d4) {
                    const float4 kk = Ks[j0 + jj][d4];  // same address across the warp: broadcast
                    dot = fmaf(qr[d4].x, kk.x, dot);
                    dot = fmaf(qr[d4].y, kk.y, dot);
                    dot = fmaf(qr[d4].z, kk.z, dot);
                    dot = fmaf(qr[d4].w, kk.w, dot);
                }
                s[jj] = (j0 + jj < jmax) ? dot : -INFINITY;
                cmax = fmaxf(cmax, s[jj]);
            }
            const float m_new = fmaxf(m, cmax);   // finite: key j0 is always valid
            const float corr = exp2f(m - m_new);  // 0 on the first chunk (m = -inf)
            l *= corr;
            #pragma unroll
            for (int d4 = 0; d4 < D4; ++d4) {
                acc[d4].x *= corr; acc[d4].y *= corr; acc[d4].z *= corr; acc[d4].w *= corr;
            }
            #pragma unroll
            for (int jj = 0; jj < ATT_CHUNK; ++jj) {
                const float p = exp2f(s[jj] - m_new);  // 0 for masked keys
                l += p;
                #pragma unroll
                for (int d4 = 0; d4 < D4; ++d4) {
                    const float4 vv = Vs[j0 + jj][d4];
                    acc[d4].x = fmaf(p, vv.x, acc[d4].x);
                    acc[d4].y = fmaf(p, vv.y, acc[d4].y);
                    acc[d4].z = fmaf(p, vv.z, acc[d4].z);
                    acc[d4].w = fmaf(p, vv.w, acc[d4].w);
                }
            }
            m = m_new;
        }
    }

    if (active) {
        const float inv = 1.0f / l;
        T* op = o + (bh * Sq + qi) * (int64_t)D;
        #pragma unroll
        for (int d4 = 0; d4 < D4; ++d4) {
            const float t[4] = {acc[d4].x, acc[d4].y, acc[d4].z, acc[d4].w};
            #pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int d = 4 * d4 + c;
                if (d < D) op[d] = from_float<T>(t[c] * inv);
            }
        }
    }
}

// q [B, H, Sq, D], k and v [B, H, Sk, D], all of dtype T -> [B, H, Sq, D].
template <typename T, bool CAUSAL>
torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, at::ScalarType dtype) {
    TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(q.scalar_type() == dtype && k.scalar_type() == dtype && v.scalar_type() == dtype,
                "q, k and v have the wrong dtype");
    TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "expected [batch, heads, seq, head_dim] tensors");
    TORCH_CHECK(k.sizes() == v.sizes(), "k and v must have the same shape");
    TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
                "q, k and v must agree on batch, heads and head_dim");
    const at::cuda::OptionalCUDAGuard guard(device_of(q));
    q = q.contiguous();
    k = k.contiguous();
    v = v.contiguous();
    const int64_t BH = q.size(0) * q.size(1), Sq = q.size(2), Sk = k.size(2), D = q.size(3);
    TORCH_CHECK(D <= 128, "this kernel supports head_dim <= 128");
    TORCH_CHECK(Sq < (1LL << 31) && Sk < (1LL << 31) && BH <= 65535, "problem too large for this kernel's grid");
    auto out = torch::empty_like(q);
    if (out.numel() == 0) return out;
    TORCH_CHECK(Sk > 0, "attention over zero keys is undefined");
    const float scale_log2e = (float)(1.0 / std::sqrt((double)D) * 1.4426950408889634);
    const dim3 grid((unsigned)((Sq + ATT_THREADS - 1) / ATT_THREADS), (unsigned)BH);
    const auto stream = at::cuda::getCurrentCUDAStream();
    const T* qp = reinterpret_cast<const T*>(q.data_ptr());
    const T* kp = reinterpret_cast<const T*>(k.data_ptr());
    const T* vp = reinterpret_cast<const T*>(v.data_ptr());
    T* op = reinterpret_cast<T*>(out.data_ptr());
    if (D <= 64)
        flash_attn_kernel<T, 64, CAUSAL><<<grid, ATT_THREADS, 0, stream>>>(qp, kp, vp, op, (int)Sq, (int)Sk, (int)D, scale_log2e);
    else
        flash_attn_kernel<T, 128, CAUSAL><<<grid, ATT_THREADS, 0, stream>>>(qp, kp, vp, op, (int)Sq, (int)Sk, (int)D, scale_log2e);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor attention_cuda(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
    return attention_forward<float, false>(q, k, v, torch::kFloat32);
}
"""

cpp_source = r"""
torch::Tensor attention_cuda(torch::Tensor q, torch::Tensor k, torch::Tensor v);
"""

ext = load_inline(
    name="suite_attention",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["attention_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return ext.attention_cuda(q, k, v)
