"""matmul (C = A @ B, fp32 2048^3; hidden 257 x 333 x 191): compute-bound, where reuse decides:
no staging (every operand read from global memory K times), shared-memory tiles of 8, 16 or 32,
and register blocking (each thread a TM x TN micro-tile of a BM x BN block tile, k-slices of BK
staged in shared memory). One is wrong: 32-wide tiles whose k-loop stops at the last whole tile,
dropping K % 32 terms (right at K = 2048, wrong at the hidden K = 333). All are far behind
cuBLAS; the grid spans about 50x between the naive uncoalesced kernel and the 128 x 128 tiles."""

from __future__ import annotations

from cudarl.rl.kernel_templates import Choice, candidate_source, ceil_div, defines

TASK = "matmul"

CHOICES = (
    Choice(
        "naive_16x16",
        "naive",
        {"BX": 16, "BY": 16, "ROWS_ON_X": 0},
        "slow",
        "a thread per output, no staging: B read coalesced, every operand fetched K times",
    ),
    Choice(
        "naive_16x16_rows_on_x",
        "naive",
        {"BX": 16, "BY": 16, "ROWS_ON_X": 1},
        "slow",
        "threadIdx.x on rows instead: each A load of a warp touches 16 rows (16 sectors, not 2)",
    ),
    Choice(
        "smem_tile8",
        "tiled",
        {"TILE": 8, "K_TAIL": 1},
        "slow",
        "8x8 shared-memory tiles: 64-thread blocks, a barrier pair every 8 k-steps, little reuse",
    ),
    Choice(
        "smem_tile16",
        "tiled",
        {"TILE": 16, "K_TAIL": 1},
        "medium",
        "16x16 shared-memory tiles: each operand read from global memory K / 16 times",
    ),
    Choice(
        "smem_tile32",
        "tiled",
        {"TILE": 32, "K_TAIL": 1},
        "medium",
        "32x32 shared-memory tiles (the suite's nvrtc solution): a 1024-thread block per tile",
    ),
    Choice(
        "regblock_32x32_2x2",
        "regblock",
        {"BM": 32, "BN": 32, "BK": 16, "TM": 2, "TN": 2},
        "medium",
        "32x32 block tiles, each of 256 threads computing 2x2 outputs from registers",
    ),
    Choice(
        "regblock_64x64_4x4",
        "regblock",
        {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4},
        "fast",
        "64x64 block tiles, 4x4 outputs per thread (the suite's inline solution): 8 shared loads per 16 FMAs",
    ),
    Choice(
        "regblock_128x128_8x8",
        "regblock",
        {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        "fast",
        "128x128 block tiles, 8x8 outputs per thread: 16 shared loads per 64 FMAs, the most reuse",
    ),
    Choice(
        "smem_tile32_no_k_tail",
        "tiled",
        {"TILE": 32, "K_TAIL": 0},
        "wrong",
        "32x32 tiles, k-loop over whole tiles only: drops K % 32 terms (none at 2048, 13 at the hidden 333)",
    ),
)

_CUDA = {
    "naive": r"""
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int K, int N) {
#if ROWS_ON_X
    const int row = blockIdx.x * BX + threadIdx.x;
    const int col = blockIdx.y * BY + threadIdx.y;
#else
    const int col = blockIdx.x * BX + threadIdx.x;
    const int row = blockIdx.y * BY + threadIdx.y;
#endif
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(long long)row * K + k], B[(long long)k * N + col], acc);
    C[(long long)row * N + col] = acc;
}
""",
    "tiled": r"""
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int K, int N) {
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const int k_end = K_TAIL ? K : K - K % TILE;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k_end; k0 += TILE) {
        a_tile[ty][tx] = (row < M && k0 + tx < K) ? A[(long long)row * K + k0 + tx] : 0.0f;
        b_tile[ty][tx] = (k0 + ty < K && col < N) ? B[(long long)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc = fmaf(a_tile[ty][k], b_tile[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}
""",
    "regblock": r"""
#define TX (BN / TN)
#define TY (BM / TM)
#define NT (TX * TY)
extern "C" __global__ void __launch_bounds__(NT) matmul(const float* __restrict__ A, const float* __restrict__ B,
                                                        float* __restrict__ C, int M, int K, int N) {
    __shared__ float As[BK][BM + 1];  // the A tile k-major, padded against bank conflicts
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += NT) {
            const int m = e / BK, k = e % BK;
            As[k][m] = (row0 + m < M && k0 + k < K) ? A[(long long)(row0 + m) * K + k0 + k] : 0.0f;
        }
        for (int e = tid; e < BK * BN; e += NT) {
            const int k = e / BN, n = e % BN;
            Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(long long)(k0 + k) * N + col0 + n] : 0.0f;
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
        const int m = row0 + ty + i * TY;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = col0 + tx + j * TX;
            if (m < M && n < N) C[(long long)m * N + n] = acc[i][j];
        }
    }
}
""",
}


def _launch(choice: Choice) -> tuple[str, str]:
    """(grid, block) as Python text."""
    p = choice.params
    if choice.family == "naive":
        x, y = ("M", "N") if p["ROWS_ON_X"] else ("N", "M")
        return f"({ceil_div(x, p['BX'])}, {ceil_div(y, p['BY'])})", f"({p['BX']}, {p['BY']})"
    if choice.family == "tiled":
        tile = p["TILE"]
        return f"({ceil_div('N', tile)}, {ceil_div('M', tile)})", f"({tile}, {tile})"
    return (f"({ceil_div('N', p['BN'])}, {ceil_div('M', p['BM'])})", f"({p['BN'] // p['TN']}, {p['BM'] // p['TM']})")


def render(choice: Choice) -> str:
    grid, block = _launch(choice)
    model = f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty(M, N, device=A.device, dtype=A.dtype)
        if M and N:
            matmul(grid={grid}, block={block}, args=[A, B, C, M, K, N])
        return C
"""
    return candidate_source(
        f"{TASK} kernel choice {choice.name}: {choice.why}.",
        defines(choice.params) + _CUDA[choice.family],
        {"matmul": "matmul"},
        model,
    )
