"""Solution for the conv2d_3x3 task: nn.Conv2d(Cin, Cout, 3, padding=1)(x), NCHW.

Implicit-GEMM convolution on a shared-memory tiled SGEMM: M = out channels,
N = batch x output pixels, K = in channels x kernel taps. The weight is the A
operand in its natural [Cout, Cin*KH*KW] layout; the B operand is gathered from
the input on the fly (im2col without the buffer; padding reads as zero), with
consecutive threads walking consecutive output pixels so the gathers coalesce.
Bias is applied in the epilogue, which scatters each
(channel, pixel) result to its NC(H)W position. Tiles: 128 (or 64 when Cout <= 64)
x 128 per 256-thread block, k-slices of 8 (next slice prefetched into registers
during the multiply), fp32 FMAs. Any batch, channel count and spatial size works.
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

// Implicit-GEMM convolution (stride 1, dilation 1, zero padding PH/PW, groups 1):
//   out[nb][co][oh][ow] = bias[co] + sum_{ci,kh,kw} w[co][ci][kh][kw] * x[nb][ci][oh+kh-PH][ow+kw-PW]
// as a GEMM with M = Cout, N = Nb*OH*OW output pixels, K = Cin*KH*KW. A is the weight
// viewed as row-major [Cout, K] (its natural layout); B(k, p) is gathered from x on the
// fly (im2col without the buffer), with zeros for the padding.
template <int KH, int KW, int PH, int PW>
struct Im2colB {
    const float* x; int Cin, H, W, OH, OW;
    __device__ __forceinline__ float operator()(int k, int p) const {
        const int ci = k / (KH * KW);
        const int r = k - ci * (KH * KW);
        const int kh = r / KW;
        const int kw = r - kh * KW;
        const int ohw = OH * OW;
        const int nb = p / ohw;
        const int q = p - nb * ohw;
        const int oh = q / OW;
        const int ow = q - oh * OW;
        const int ih = oh + kh - PH;
        const int iw = ow + kw - PW;
        if ((unsigned)ih >= (unsigned)H || (unsigned)iw >= (unsigned)W) return 0.0f;
        return __ldg(x + (((int64_t)nb * Cin + ci) * H + ih) * W + iw);
    }
};
struct WeightA {
    const float* p; int64_t ld;
    __device__ __forceinline__ float operator()(int co, int k) const { return __ldg(p + (int64_t)co * ld + k); }
};
// C(co, p) -> out[nb][co][q] with p = nb * OH*OW + q; adds bias, optional ReLU.
template <bool RELU>
struct ConvStore {
    float* out; const float* bias; int Cout, OHW;
    __device__ __forceinline__ void operator()(int co, int p, float v) const {
        if (bias != nullptr) v += __ldg(bias + co);
        if (RELU) v = fmaxf(v, 0.0f);
        const int nb = p / OHW;
        const int q = p - nb * OHW;
        out[((int64_t)nb * Cout + co) * OHW + q] = v;
    }
};

// x [Nb, Cin, H, W], w [Cout, Cin, KH, KW], b [Cout] or undefined -> [Nb, Cout, OH, OW].
template <int KH, int KW, int PH, int PW, bool RELU>
torch::Tensor conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "expected x [N, C, H, W] and w [Cout, Cin, KH, KW]");
    TORCH_CHECK(w.size(1) == x.size(1) && w.size(2) == KH && w.size(3) == KW, "weight shape does not match");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    x = x.contiguous();
    w = w.contiguous();
    if (b.defined()) {
        TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32 && b.numel() == w.size(0), "bad bias");
        b = b.contiguous();
    }
    const int64_t Nb = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3), Cout = w.size(0);
    const int64_t OH = H + 2 * PH - KH + 1, OW = W + 2 * PW - KW + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "input smaller than the kernel");
    const int64_t P = Nb * OH * OW, K = Cin * KH * KW;
    TORCH_CHECK(P < (1LL << 31) && K < (1LL << 31) && Cout < (1LL << 31) && x.numel() < (1LL << 62),
                "problem too large for this kernel");
    auto out = torch::empty({Nb, Cout, OH, OW}, x.options());
    if (out.numel() == 0) return out;
    const auto stream = at::cuda::getCurrentCUDAStream();
    const WeightA a_op{w.data_ptr<float>(), K};
    const Im2colB<KH, KW, PH, PW> b_op{x.data_ptr<float>(), (int)Cin, (int)H, (int)W, (int)OH, (int)OW};
    const ConvStore<RELU> epi{out.data_ptr<float>(), b.defined() ? b.data_ptr<float>() : nullptr,
                              (int)Cout, (int)(OH * OW)};
    if (Cout > 64) {
        const dim3 grid = gemm_grid<128, 128>(Cout, P, 1);
        gemm_tiled_kernel<128, 128, true><<<grid, GEMM_THREADS, 0, stream>>>(a_op, b_op, epi, (int)Cout, (int)P, (int)K);
    } else {  // few output channels: a 64-row tile wastes less
        const dim3 grid = gemm_grid<64, 128>(Cout, P, 1);
        gemm_tiled_kernel<64, 128, true><<<grid, GEMM_THREADS, 0, stream>>>(a_op, b_op, epi, (int)Cout, (int)P, (int)K);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor conv2d_3x3_cuda(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> b) {
    return conv_forward<3, 3, 1, 1, false>(x, w, b.has_value() ? *b : torch::Tensor());
}
"""

cpp_source = r"""
#include <optional>
torch::Tensor conv2d_3x3_cuda(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> b);
"""

ext = load_inline(
    name="suite_conv2d_3x3",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv2d_3x3_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        if c.stride != (1, 1) or c.dilation != (1, 1) or c.groups != 1 or c.padding_mode != "zeros" or c.padding != (1, 1):
            raise ValueError("this kernel implements stride 1, dilation 1, groups 1, zero padding (1, 1) only")
        return ext.conv2d_3x3_cuda(x, c.weight, c.bias)
