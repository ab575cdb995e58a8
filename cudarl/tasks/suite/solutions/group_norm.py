"""Solution for the group_norm task: nn.GroupNorm on NCHW with affine weight/bias.

Each (sample, group) is a contiguous block of (C/G)*H*W floats. Three kernels:
1. stats: the group is cut into chunks of at most 16384 elements, one
   256-thread block per chunk; the block computes the chunk's mean (block sum)
   and then its sum of squared deviations from that mean (second pass over the
   chunk, served mostly from cache), a numerically stable two-pass scheme.
2. combine: one thread per group merges its chunks' (count, mean, M2) with
   Chan's parallel formula in double and stores mean and rstd = 1/sqrt(var + eps)
   (biased variance, like PyTorch).
3. normalize: grid-stride elementwise y = (x - mean) * rstd * w[c] + b[c],
   float4 when H*W is a multiple of 4 (a float4 then never straddles channels).
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

constexpr int64_t CHUNK = 16384;

__device__ __forceinline__ float warp_reduce_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// blockDim.x a multiple of 32; smem holds >= 33 floats; result broadcast to all threads.
__device__ __forceinline__ float block_reduce_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();
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

// grid: (chunks_per_group, groups_total). Writes mean and M2 of each chunk.
__global__ void gn_chunk_stats_kernel(const float* __restrict__ x, float* __restrict__ chunk_mean,
                                      float* __restrict__ chunk_m2, int64_t group_size, int chunks) {
    __shared__ float smem[33];
    const int64_t g = blockIdx.y;
    const int64_t c = blockIdx.x;
    const int64_t start = c * CHUNK;
    const int64_t end = start + CHUNK < group_size ? start + CHUNK : group_size;
    const float* xg = x + g * group_size;
    float s = 0.0f;
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) s += xg[i];
    const float mean = block_reduce_sum(s, smem) / (float)(end - start);
    float q = 0.0f;
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
        const float d = xg[i] - mean;
        q += d * d;
    }
    const float m2 = block_reduce_sum(q, smem);
    if (threadIdx.x == 0) {
        chunk_mean[g * chunks + c] = mean;
        chunk_m2[g * chunks + c] = m2;
    }
}

__global__ void gn_combine_kernel(const float* __restrict__ chunk_mean, const float* __restrict__ chunk_m2,
                                  float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                  int64_t groups_total, int chunks, int64_t group_size, float eps) {
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups_total) return;
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (int c = 0; c < chunks; ++c) {
        const int64_t start = (int64_t)c * CHUNK;
        const int64_t len = (start + CHUNK < group_size ? start + CHUNK : group_size) - start;
        const double nb = (double)len;
        const double mb = (double)chunk_mean[g * chunks + c];
        const double qb = (double)chunk_m2[g * chunks + c];
        const double tot = n + nb;
        const double delta = mb - mean;
        mean += delta * nb / tot;
        m2 += qb + delta * delta * n * nb / tot;
        n = tot;
    }
    const double var = m2 / n;  // biased
    mean_out[g] = (float)mean;
    rstd_out[g] = (float)(1.0 / sqrt(var + (double)eps));
}

template <bool VEC>
__global__ void gn_normalize_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                    const float* __restrict__ rstd, const float* __restrict__ w,
                                    const float* __restrict__ b, float* __restrict__ y,
                                    int64_t total, int64_t C, int64_t HW, int64_t channels_per_group) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (VEC) {
        const int64_t total4 = total >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t i = tid; i < total4; i += stride) {
            const int64_t nc = (i << 2) / HW;  // sample * C + channel
            const int64_t ch = nc % C;
            const int64_t g = (nc / C) * (C / channels_per_group) + ch / channels_per_group;
            const float mu = mean[g], r = rstd[g], wc = w[ch], bc = b[ch];
            const float4 v = x4[i];
            float4 o;
            o.x = (v.x - mu) * r * wc + bc;
            o.y = (v.y - mu) * r * wc + bc;
            o.z = (v.z - mu) * r * wc + bc;
            o.w = (v.w - mu) * r * wc + bc;
            y4[i] = o;
        }
    } else {
        for (int64_t i = tid; i < total; i += stride) {
            const int64_t nc = i / HW;
            const int64_t ch = nc % C;
            const int64_t g = (nc / C) * (C / channels_per_group) + ch / channels_per_group;
            y[i] = (x[i] - mean[g]) * rstd[g] * w[ch] + b[ch];
        }
    }
}

torch::Tensor group_norm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t groups, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(x.dim() >= 2, "input must be [N, C, *]");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t Nb = x.size(0), C = x.size(1);
    TORCH_CHECK(groups > 0 && C % groups == 0, "channels must be divisible by groups");
    TORCH_CHECK(weight.numel() == C && bias.numel() == C, "weight/bias must have C elements");
    auto y = torch::empty_like(x);
    const int64_t total = x.numel();
    if (total == 0) return y;
    const int64_t HW = total / (Nb * C);
    const int64_t cpg = C / groups;
    const int64_t group_size = cpg * HW;
    const int64_t groups_total = Nb * groups;
    const int64_t chunks64 = (group_size + CHUNK - 1) / CHUNK;
    TORCH_CHECK(chunks64 <= 0x7fffffff && groups_total <= 65535, "input too large for this kernel");
    const int chunks = (int)chunks64;

    auto stream = at::cuda::getCurrentCUDAStream();
    auto opts = x.options();
    auto chunk_mean = torch::empty({groups_total * chunks}, opts);
    auto chunk_m2 = torch::empty({groups_total * chunks}, opts);
    auto mean = torch::empty({groups_total}, opts);
    auto rstd = torch::empty({groups_total}, opts);

    gn_chunk_stats_kernel<<<dim3(chunks, (unsigned)groups_total), 256, 0, stream>>>(
        x.data_ptr<float>(), chunk_mean.data_ptr<float>(), chunk_m2.data_ptr<float>(), group_size, chunks);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    gn_combine_kernel<<<(unsigned)((groups_total + 127) / 128), 128, 0, stream>>>(
        chunk_mean.data_ptr<float>(), chunk_m2.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
        groups_total, chunks, group_size, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();

    const float* px = x.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const bool vec = (HW % 4 == 0) && (reinterpret_cast<uintptr_t>(px) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(py) % 16 == 0);
    const int threads = 256;
    const int64_t work = vec ? total / 4 : total;
    const int blocks = (int)std::min<int64_t>((work + threads - 1) / threads, 1 << 20);
    if (vec)
        gn_normalize_kernel<true><<<blocks, threads, 0, stream>>>(px, mean.data_ptr<float>(), rstd.data_ptr<float>(),
            weight.data_ptr<float>(), bias.data_ptr<float>(), py, total, C, HW, cpg);
    else
        gn_normalize_kernel<false><<<blocks, threads, 0, stream>>>(px, mean.data_ptr<float>(), rstd.data_ptr<float>(),
            weight.data_ptr<float>(), bias.data_ptr<float>(), py, total, C, HW, cpg);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor group_norm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t groups, double eps);
"""

group_norm_ext = load_inline(
    name="suite_group_norm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["group_norm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)
        with torch.no_grad():
            self.gn.weight.add_(0.5 * torch.randn(num_channels))
            self.gn.bias.add_(0.5 * torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return group_norm_ext.group_norm_cuda(x, self.gn.weight.detach(), self.gn.bias.detach(),
                                              self.gn.num_groups, float(self.gn.eps))
