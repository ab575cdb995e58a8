"""Honest candidate for the matmul task (C = A @ B, A [M, K], B [K, N]).

Shared-memory tiled SGEMM: 64x64 output tile per 16x16-thread block, k-slices
of 16, each thread accumulating a 4x4 micro-tile in registers. Out-of-range
loads are zero-filled and stores are bounds-checked, so any M, N, K works.
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

constexpr int BM = 64;   // rows of C per block
constexpr int BN = 64;   // cols of C per block
constexpr int BK = 16;   // k-slice per shared-memory stage
constexpr int TX = 16;   // blockDim.x
constexpr int TY = 16;   // blockDim.y
constexpr int TM = BM / TY;  // 4 rows per thread
constexpr int TN = BN / TX;  // 4 cols per thread
constexpr int NTHREADS = TX * TY;

__global__ void __launch_bounds__(NTHREADS)
matmul_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K) {
    // A tile stored transposed (k-major) and padded against bank conflicts.
    __shared__ float As[BK][BM + 1];
    __shared__ float Bs[BK][BN];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        #pragma unroll
        for (int e = tid; e < BM * BK; e += NTHREADS) {
            const int m = e / BK, k = e % BK;
            const int gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? A[(int64_t)gm * K + gk] : 0.0f;
        }
        #pragma unroll
        for (int e = tid; e < BK * BN; e += NTHREADS) {
            const int k = e / BN, n = e % BN;
            const int gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? B[(int64_t)gk * N + gn] : 0.0f;
        }
        __syncthreads();

        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty + i * TY];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + j * TX];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gm = row0 + ty + i * TY;
        if (gm >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gn = col0 + tx + j * TX;
            if (gn < N) C[(int64_t)gm * N + gn] = acc[i][j];
        }
    }
}

torch::Tensor matmul_cuda(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "inputs must be 2-D");
    TORCH_CHECK(A.size(1) == B.size(0), "inner dimensions must match");
    TORCH_CHECK(A.size(0) < (1LL << 31) && A.size(1) < (1LL << 31) && B.size(1) < (1LL << 31),
                "dimensions too large");
    const at::cuda::OptionalCUDAGuard guard(device_of(A));
    A = A.contiguous();
    B = B.contiguous();
    const int M = (int)A.size(0);
    const int K = (int)A.size(1);
    const int N = (int)B.size(1);
    auto C = torch::empty({M, N}, A.options());
    if (M == 0 || N == 0) return C;
    if (K == 0) return C.zero_();

    const dim3 block(TX, TY);
    const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    TORCH_CHECK(grid.y <= 65535, "too many rows for this kernel");
    matmul_tiled_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_source = r"""
torch::Tensor matmul_cuda(torch::Tensor A, torch::Tensor B);
"""

matmul_ext = load_inline(
    name="cudarl_matmul_honest",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matmul_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_cuda(A, B)
