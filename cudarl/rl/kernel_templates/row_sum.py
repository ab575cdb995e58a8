"""row_sum (x.sum(dim=1) over [8192, 8192] floats; hidden [1031, 3001]): a bandwidth-bound
reduction where the mapping of rows to threads decides everything. Choices: a thread, a warp or
a block per row, block size, float4 loads, and the block's reduction (a shared-memory tree or
warp shuffles). Two are wrong: a tree reduction that halves a block of 384 threads (not a power
of two, so a partial sum is dropped) and a warp-per-row grid rounded down (the last rows are
never written when the row count is not a multiple of the rows per block)."""

from __future__ import annotations

from cudarl.rl.kernel_templates import Choice, candidate_source, ceil_div, defines

TASK = "row_sum"

CHOICES = (
    Choice(
        "thread_per_row_b128",
        "thread",
        {"BLOCK": 128},
        "slow",
        "one thread walks a whole row (compensated sum): 8192 threads in all, neighbours read 32 KB apart",
    ),
    Choice(
        "warp_per_row_b256",
        "warp",
        {"BLOCK": 256, "VEC": 0, "FLOOR_GRID": 0},
        "fast",
        "a warp per row (8 rows per block), coalesced loads in 4 chains, shuffle reduction, no shared memory",
    ),
    Choice(
        "warp_per_row_b256_float4",
        "warp",
        {"BLOCK": 256, "VEC": 1, "FLOOR_GRID": 0},
        "fast",
        "a warp per row with 16-byte loads where the row allows (cols % 4 == 0), else scalar",
    ),
    Choice(
        "block_per_row_b256_tree",
        "block",
        {"BLOCK": 256, "VEC": 0, "SHUFFLE": 0},
        "fast",
        "a block of 256 per row, shared-memory tree reduction (8 barriers)",
    ),
    Choice(
        "block_per_row_b1024_tree",
        "block",
        {"BLOCK": 1024, "VEC": 0, "SHUFFLE": 0},
        "medium",
        "a block of 1024 per row: 8 loads per thread, then 10 barrier rounds of the tree",
    ),
    Choice(
        "block_per_row_b256_shuffle_float4",
        "block",
        {"BLOCK": 256, "VEC": 1, "SHUFFLE": 1},
        "fast",
        "a block of 256 per row, float4 loads, warp shuffles and one barrier (the suite's inline solution)",
    ),
    Choice(
        "block_per_row_b64_shuffle",
        "block",
        {"BLOCK": 64, "VEC": 0, "SHUFFLE": 1},
        "fast",
        "two warps per row, shuffle reduction: small blocks, many resident",
    ),
    Choice(
        "block_per_row_b384_tree",
        "block",
        {"BLOCK": 384, "VEC": 0, "SHUFFLE": 0},
        "wrong",
        "tree reduction halving 384 threads (192, 96, ..., 3, 1): at width 3 the third partial is dropped",
    ),
    Choice(
        "warp_per_row_b256_floorgrid",
        "warp",
        {"BLOCK": 256, "VEC": 0, "FLOOR_GRID": 1},
        "wrong",
        "grid = rows // 8 (rounded down): right at 8192 rows, the last 7 of the hidden 1031 rows unwritten",
    ),
)

_WARP_SUM = r"""
__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
"""

_CUDA = {
    "thread": r"""
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ out,
                                   long long rows, long long cols, int vec4) {
    const long long row = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (row >= rows) return;
    const float* r = x + row * cols;
    float sum = 0.0f, carry = 0.0f;  // compensated: 8192 plain fp32 adds in a row drift past the tolerance
    for (long long j = 0; j < cols; ++j) {
        const float y = r[j] - carry;
        const float t = sum + y;
        carry = (t - sum) - y;
        sum = t;
    }
    out[row] = sum;
}
""",
    "warp": _WARP_SUM
    + r"""
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ out,
                                   long long rows, long long cols, int vec4) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
    if (row >= rows) return;  // a whole warp leaves together, so the shuffles stay full
    const float* r = x + row * cols;
    float acc = 0.0f;
#if VEC
    if (vec4) {
        const float4* r4 = reinterpret_cast<const float4*>(r);
        for (long long j = lane; j < cols / 4; j += 32) {
            const float4 v = r4[j];
            acc += (v.x + v.y) + (v.z + v.w);
        }
    } else
#endif
    {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;  // four chains: more loads in flight, shorter sums
        long long j = lane;
        for (; j + 96 < cols; j += 128) {
            a0 += r[j];
            a1 += r[j + 32];
            a2 += r[j + 64];
            a3 += r[j + 96];
        }
        for (; j < cols; j += 32) a0 += r[j];
        acc = (a0 + a1) + (a2 + a3);
    }
    acc = warp_sum(acc);
    if (lane == 0) out[row] = acc;
}
""",
    "block": _WARP_SUM
    + r"""
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ out,
                                   long long rows, long long cols, int vec4) {
    __shared__ float partial[BLOCK];
    const float* r = x + (long long)blockIdx.x * cols;
    float acc = 0.0f;
#if VEC
    if (vec4) {
        const float4* r4 = reinterpret_cast<const float4*>(r);
        for (long long j = threadIdx.x; j < cols / 4; j += BLOCK) {
            const float4 v = r4[j];
            acc += (v.x + v.y) + (v.z + v.w);
        }
    } else
#endif
    {
        for (long long j = threadIdx.x; j < cols; j += BLOCK) acc += r[j];
    }
#if SHUFFLE
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : 0.0f;
        acc = warp_sum(acc);
        if (threadIdx.x == 0) out[blockIdx.x] = acc;
    }
#else
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = BLOCK / 2; width > 0; width /= 2) {  // exact only when BLOCK is a power of two
        if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
#endif
}
""",
}


def _grid(choice: Choice) -> str:
    p = choice.params
    if choice.family == "thread":
        return ceil_div("rows", p["BLOCK"])
    if choice.family == "warp":
        per_block = p["BLOCK"] // 32
        return f"max(1, rows // {per_block})" if p["FLOOR_GRID"] else ceil_div("rows", per_block)
    return "rows"


def render(choice: Choice) -> str:
    model = f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        if rows:
            # float4 loads need every row start 16-byte aligned: an aligned base and cols % 4 == 0
            vec4 = 1 if cols % 4 == 0 and x.data_ptr() % 16 == 0 else 0
            row_sum(grid={_grid(choice)}, block={choice.params["BLOCK"]}, args=[x, out, i64(rows), i64(cols), vec4])
        return out
"""
    return candidate_source(
        f"{TASK} kernel choice {choice.name}: {choice.why}.",
        defines(choice.params) + _CUDA[choice.family],
        {"row_sum": "row_sum"},
        model,
    )
