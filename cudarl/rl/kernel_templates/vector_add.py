"""vector_add (out = a + b, 2^26 floats; hidden size 1000003, not a multiple of 4): memory-bound,
so what matters is keeping enough bytes in flight with coalesced accesses. Choices: block size,
float4 loads, vectors per thread (unrolling), a grid-stride loop over a fixed grid, a per-thread
contiguous chunk (uncoalesced), and a float4 kernel that forgets the tail (wrong)."""

from __future__ import annotations

from cudarl.rl.kernel_templates import Choice, candidate_source, ceil_div, defines

TASK = "vector_add"

CHOICES = (
    Choice(
        "scalar_b256",
        "cover",
        {"BLOCK": 256, "ITEMS": 1},
        "fast",
        "one element per thread, 256 threads, a block per 256 elements: coalesced, full occupancy",
    ),
    Choice(
        "scalar_b32",
        "cover",
        {"BLOCK": 32, "ITEMS": 1},
        "medium",
        "32-thread blocks: at most 32 blocks per SM caps occupancy at half, fewer loads in flight",
    ),
    Choice(
        "scalar_b1024",
        "cover",
        {"BLOCK": 1024, "ITEMS": 1},
        "fast",
        "1024 threads per block, one element each: coalesced, full occupancy",
    ),
    Choice(
        "float4_b256",
        "float4",
        {"BLOCK": 256, "ITEMS": 1, "TAIL": 1},
        "fast",
        "16-byte loads and stores (a quarter of the instructions), the n % 4 tail done separately",
    ),
    Choice(
        "float4_b128_unroll4",
        "float4",
        {"BLOCK": 128, "ITEMS": 4, "TAIL": 1},
        "fast",
        "four float4 per thread, strided by the block so each load stays coalesced: more bytes in flight",
    ),
    Choice(
        "gridstride_b256_g2048",
        "gridstride",
        {"BLOCK": 256, "GRID": 2048},
        "fast",
        "grid-stride loop over 2048 blocks (about 16 per SM): every SM full, loop overhead small",
    ),
    Choice(
        "gridstride_b256_g32",
        "gridstride",
        {"BLOCK": 256, "GRID": 32},
        "slow",
        "grid-stride loop over only 32 blocks: 32 of the SMs busy with 8 warps each, far too few loads in "
        "flight to cover memory latency",
    ),
    Choice(
        "chunk16_b256",
        "chunk",
        {"BLOCK": 256, "CHUNK": 16},
        "slow",
        "each thread adds 16 consecutive elements: a warp's loads touch 32 lines 64 bytes apart (uncoalesced)",
    ),
    Choice(
        "float4_b256_notail",
        "float4",
        {"BLOCK": 256, "ITEMS": 1, "TAIL": 0},
        "wrong",
        "float4 only, the n % 4 tail never written: right at 2^26, wrong at the hidden size 1000003",
    ),
)

_SCALAR_FALLBACK = r"""
extern "C" __global__ void vector_add_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                             float* __restrict__ out, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""

_CUDA = {
    "cover": r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, long long n) {
    const long long base = (long long)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const long long i = base + (long long)k * BLOCK;
        if (i < n) out[i] = a[i] + b[i];
    }
}
""",
    "float4": r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, long long n) {
    const long long n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* out4 = reinterpret_cast<float4*>(out);
    const long long base = (long long)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const long long v = base + (long long)k * BLOCK;
        if (v < n4) {
            const float4 x = a4[v];
            const float4 y = b4[v];
            out4[v] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
    }
#if TAIL
    if (blockIdx.x == 0 && threadIdx.x < (n & 3)) {  // the last n % 4 elements
        const long long i = n4 * 4 + threadIdx.x;
        out[i] = a[i] + b[i];
    }
#endif
}
"""
    + _SCALAR_FALLBACK,
    "gridstride": r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, long long n) {
    const long long stride = (long long)BLOCK * gridDim.x;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) out[i] = a[i] + b[i];
}
""",
    "chunk": r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, long long n) {
    const long long start = ((long long)blockIdx.x * BLOCK + threadIdx.x) * CHUNK;
    #pragma unroll
    for (int k = 0; k < CHUNK; ++k) {
        const long long i = start + k;
        if (i < n) out[i] = a[i] + b[i];
    }
}
""",
}


def _grid(choice: Choice) -> str:
    p = choice.params
    if choice.family == "cover":
        return ceil_div("n", p["BLOCK"] * p["ITEMS"])
    if choice.family == "float4":
        return f"max(1, {ceil_div('n // 4', p['BLOCK'] * p['ITEMS'])})"
    if choice.family == "gridstride":
        return f"min({p['GRID']}, {ceil_div('n', p['BLOCK'])})"
    return ceil_div("n", p["BLOCK"] * p["CHUNK"])


def render(choice: Choice) -> str:
    block = choice.params["BLOCK"]
    launch = f"vector_add(grid={_grid(choice)}, block={block}, args=[a, b, out, i64(n)])"
    kernels = {"vector_add": "vector_add"}
    if choice.family == "float4":
        kernels["vector_add_scalar"] = "vector_add_scalar"
        # float4 needs 16-byte aligned pointers; a view at an odd offset takes the scalar kernel.
        launch = (
            f"if a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0 and out.data_ptr() % 16 == 0:\n"
            f"                {launch}\n            else:\n"
            f"                vector_add_scalar(grid={ceil_div('n', 256)}, block=256, args=[a, b, out, i64(n)])"
        )
    model = f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        if n:
            {launch}
        return out
"""
    return candidate_source(
        f"{TASK} kernel choice {choice.name}: {choice.why}.",
        defines(choice.params) + _CUDA[choice.family],
        kernels,
        model,
    )
