"""Solution for the matvec task: y = A @ x.

One warp per row of A (8 rows per 256-thread block, grid-stride over rows).
Lanes walk the row with float4 loads when every row and x are 16-byte aligned
(scalar loads otherwise), multiply by x (read through the read-only cache;
it is small and shared by all warps) and the warp reduces with shuffles. The
kernel streams A once, which is the whole cost of this memory-bound op.
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

__device__ __forceinline__ float warp_reduce_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

template <bool VEC>
__global__ void matvec_kernel(const float* __restrict__ A, const float* __restrict__ x,
                              float* __restrict__ y, int64_t M, int64_t K) {
    const int lane = threadIdx.x & 31;
    const int warps_per_block = blockDim.x >> 5;
    const int64_t warp_id = (int64_t)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const int64_t n_warps = (int64_t)gridDim.x * warps_per_block;
    for (int64_t row = warp_id; row < M; row += n_warps) {
        const float* a = A + row * K;
        float acc = 0.0f;
        if (VEC) {
            const float4* a4 = reinterpret_cast<const float4*>(a);
            const float4* x4 = reinterpret_cast<const float4*>(x);
            const int64_t k4 = K >> 2;
            #pragma unroll 4
            for (int64_t j = lane; j < k4; j += 32) {
                const float4 av = a4[j];
                const float4 xv = __ldg(x4 + j);
                acc += av.x * xv.x + av.y * xv.y + av.z * xv.z + av.w * xv.w;
            }
        } else {
            for (int64_t j = lane; j < K; j += 32) acc += a[j] * __ldg(x + j);
        }
        acc = warp_reduce_sum(acc);
        if (lane == 0) y[row] = acc;
    }
}

torch::Tensor matvec_cuda(torch::Tensor A, torch::Tensor x) {
    TORCH_CHECK(A.is_cuda() && x.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && x.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && x.dim() == 1, "expected A [M, K] and x [K]");
    TORCH_CHECK(A.size(1) == x.size(0), "A and x sizes do not match");
    const at::cuda::OptionalCUDAGuard guard(device_of(A));
    A = A.contiguous();
    x = x.contiguous();
    const int64_t M = A.size(0), K = A.size(1);
    auto y = torch::empty({M}, A.options());
    if (M == 0) return y;
    if (K == 0) return y.zero_();

    const float* pa = A.data_ptr<float>();
    const float* px = x.data_ptr<float>();
    const bool vec = (K % 4 == 0) && (reinterpret_cast<uintptr_t>(pa) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(px) % 16 == 0);
    const int threads = 256;
    const int rows_per_block = threads / 32;
    const int blocks = (int)std::min<int64_t>((M + rows_per_block - 1) / rows_per_block, 1 << 20);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) matvec_kernel<true><<<blocks, threads, 0, stream>>>(pa, px, y.data_ptr<float>(), M, K);
    else matvec_kernel<false><<<blocks, threads, 0, stream>>>(pa, px, y.data_ptr<float>(), M, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = r"""
torch::Tensor matvec_cuda(torch::Tensor A, torch::Tensor x);
"""

matvec_ext = load_inline(
    name="suite_matvec",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matvec_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return matvec_ext.matvec_cuda(A, x)
