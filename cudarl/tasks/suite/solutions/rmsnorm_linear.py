"""Solution for the rmsnorm_linear task: Linear(RMSNorm(x)).

Two kernels. The first computes each row's 1 / sqrt(mean(x^2) + eps) (one warp per
row, float32 sums, shuffle reduction). The second is a shared-memory tiled SGEMM
whose A-operand loader applies the normalisation on the fly, a(m, k) =
x[m][k] * rstd[m] * weight[k], so the normalised activations are never written to
memory; the Linear's bias is added in the epilogue. GEMM: one 128x128 output tile
per 256-thread block, k-slices of 8 (next slice prefetched into registers during
the multiply), 8x8 register micro-tile per thread, fp32 FMAs. Any shape works.
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

// ---------------------------------------------------------------------------
// Tiled SGEMM core: C[m][n] = sum_k a_op(m, k) * b_op(k, n), then epi(m, n, C[m][n]).
// One BM x BN output tile per 256-thread block (16 x 16 threads); thread (ty, tx) owns
// the (BM/16) x (BN/16) register micro-tile at rows ty + 16 i, cols tx + 16 j. K is
// walked in slices of 8 staged through shared memory; the next slice is fetched into
// registers while the current one is multiplied. a_op / b_op are only called inside
// [0, M) x [0, K) and [0, K) x [0, N) (zero elsewhere); epi only inside [0, M) x [0, N).
// B_KN picks the B fetch pattern: true = consecutive threads walk n (B stored k-major,
// e.g. row-major [K, N]); false = consecutive threads walk k (B stored n-major, e.g. a
// row-major [N, K] weight). A is fetched with consecutive threads walking k.
// ---------------------------------------------------------------------------
constexpr int GEMM_BK = 8;
constexpr int GEMM_THREADS = 256;

template <int BM, int BN, bool B_KN, class AOp, class BOp, class EpiOp>
__global__ void __launch_bounds__(GEMM_THREADS, 2)
gemm_tiled_kernel(const AOp a_op, const BOp b_op, const EpiOp epi,
                  const int M, const int N, const int K) {
    constexpr int BK = GEMM_BK;
    constexpr int TM = BM / 16;
    constexpr int TN = BN / 16;
    constexpr int A_LOADS = BM * BK / GEMM_THREADS;
    constexpr int B_LOADS = BN * BK / GEMM_THREADS;
    static_assert(BM % 32 == 0 && BN % 32 == 0, "BM and BN must be multiples of 32");
    // +4 padding: the transposed stores below hit 32 distinct banks per warp.
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];

    const int tid = threadIdx.x;
    const int tx = tid % 16;
    const int ty = tid / 16;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float ra[A_LOADS];
    float rb[B_LOADS];

    auto fetch = [&](int k0) {
        #pragma unroll
        for (int r = 0; r < A_LOADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            const int m = row0 + e / BK;
            const int k = k0 + e % BK;
            ra[r] = (m < M && k < K) ? a_op(m, k) : 0.0f;
        }
        #pragma unroll
        for (int r = 0; r < B_LOADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            const int k = B_KN ? k0 + e / BN : k0 + e % BK;
            const int n = B_KN ? col0 + e % BN : col0 + e / BK;
            rb[r] = (k < K && n < N) ? b_op(k, n) : 0.0f;
        }
    };
    auto stash = [&]() {
        #pragma unroll
        for (int r = 0; r < A_LOADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            As[e % BK][e / BK] = ra[r];
        }
        #pragma unroll
        for (int r = 0; r < B_LOADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            if (B_KN) Bs[e / BN][e % BN] = rb[r];
            else      Bs[e % BK][e / BK] = rb[r];
        }
    };

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    fetch(0);
    stash();
    __syncthreads();
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) fetch(k0 + BK);  // global loads in flight during the FMAs below
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty + 16 * i];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + 16 * j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();  // everyone is done reading this slice
        if (more) {
            stash();
            __syncthreads();
        }
    }

    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = row0 + ty + 16 * i;
        if (m >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = col0 + tx + 16 * j;
            if (n < N) epi(m, n, acc[i][j]);
        }
    }
}

// Grid for gemm_tiled_kernel (z = batch); checks the CUDA grid limits.
template <int BM, int BN>
inline dim3 gemm_grid(int64_t M, int64_t N, int64_t batch) {
    const int64_t gx = (N + BN - 1) / BN, gy = (M + BM - 1) / BM;
    TORCH_CHECK(gx <= 2147483647LL && gy <= 65535 && batch <= 65535, "problem too large for this kernel's grid");
    return dim3((unsigned)gx, (unsigned)gy, (unsigned)batch);
}
// ---------------------------------------------------------------------------

// rstd[row] = 1 / sqrt(mean(x[row, :]^2) + eps); one warp per row.
__global__ void row_rstd_kernel(const float* __restrict__ x, float* __restrict__ rstd,
                                int64_t rows, int64_t cols, float eps) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float s = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
        const float v = __ldg(xr + j);
        s = fmaf(v, v, s);
    }
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) rstd[row] = rsqrtf(s / (float)cols + eps);
}

// a(m, k) = x[m][k] * rstd[m] * g[k]: the RMSNorm output, computed while loading.
struct NormalizedA {
    const float* x; const float* rstd; const float* g; int64_t ld;
    __device__ __forceinline__ float operator()(int m, int k) const {
        return __ldg(x + (int64_t)m * ld + k) * __ldg(rstd + m) * __ldg(g + k);
    }
};
// nn.Linear weight W [N, K] read as op(B)(k, n) = W[n][k].
struct WeightB {
    const float* p; int64_t ld;
    __device__ __forceinline__ float operator()(int k, int n) const { return __ldg(p + (int64_t)n * ld + k); }
};
struct BiasStore {
    float* p; const float* bias; int64_t ld;
    __device__ __forceinline__ void operator()(int m, int n, float v) const {
        if (bias != nullptr) v += __ldg(bias + n);
        p[(int64_t)m * ld + n] = v;
    }
};

torch::Tensor rmsnorm_linear_cuda(torch::Tensor x, torch::Tensor g, double eps,
                                  torch::Tensor w, std::optional<torch::Tensor> b_opt) {
    TORCH_CHECK(x.is_cuda() && g.is_cuda() && w.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && g.scalar_type() == torch::kFloat32 &&
                w.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(w.dim() == 2 && x.dim() >= 1, "bad ranks");
    const int64_t K = x.size(-1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K && g.numel() == K, "x's last dimension, the norm weight and in_features must match");
    torch::Tensor b = b_opt.has_value() ? *b_opt : torch::Tensor();
    if (b.defined()) {
        TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32 && b.numel() == N, "bad bias");
        b = b.contiguous();
    }
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto x2 = x.contiguous().reshape({-1, K});
    g = g.contiguous();
    w = w.contiguous();
    const int64_t M = x2.size(0);
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "dimensions too large");
    std::vector<int64_t> out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    auto out = torch::empty(out_sizes, x.options());
    if (out.numel() == 0) return out;
    const auto stream = at::cuda::getCurrentCUDAStream();

    auto rstd = torch::empty({M}, x.options());
    const int rows_per_block = 8;  // 256 threads, one warp per row
    row_rstd_kernel<<<(unsigned)((M + rows_per_block - 1) / rows_per_block), 32 * rows_per_block, 0, stream>>>(
        x2.data_ptr<float>(), rstd.data_ptr<float>(), M, K, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();

    const dim3 grid = gemm_grid<128, 128>(M, N, 1);
    gemm_tiled_kernel<128, 128, false><<<grid, GEMM_THREADS, 0, stream>>>(
        NormalizedA{x2.data_ptr<float>(), rstd.data_ptr<float>(), g.data_ptr<float>(), K},
        WeightB{w.data_ptr<float>(), K},
        BiasStore{out.data_ptr<float>(), b.defined() ? b.data_ptr<float>() : nullptr, N},
        (int)M, (int)N, (int)K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
#include <optional>
torch::Tensor rmsnorm_linear_cuda(torch::Tensor x, torch::Tensor g, double eps,
                                  torch::Tensor w, std::optional<torch::Tensor> b_opt);
"""

ext = load_inline(
    name="suite_rmsnorm_linear",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rmsnorm_linear_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden, out_features):
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=1e-6)
        self.linear = nn.Linear(hidden, out_features)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps = self.norm.eps if self.norm.eps is not None else torch.finfo(x.dtype).eps
        return ext.rmsnorm_linear_cuda(x, self.norm.weight, float(eps), self.linear.weight, self.linear.bias)
