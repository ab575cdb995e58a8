import torch
import torch.nn as nn

M = 4096
K = 2048
N = 4096


class Model(nn.Module):
    """Half-precision matrix product C = A @ B, A [M, K], B [K, N], all float16.

    Products of float16 values are exact in float32; the sum is accumulated in
    float32 and rounded to float16 once at the end (what cuBLAS does on the GPU).
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if A.is_cuda:
            return torch.matmul(A, B)
        # The CPU has no fast float16 GEMM; upcasting computes the same thing
        # (exact products, float32 accumulation, one rounding to float16).
        return torch.matmul(A.float(), B.float()).to(A.dtype)


def get_inputs():
    A = torch.randn(M, K, dtype=torch.float16)
    B = torch.randn(K, N, dtype=torch.float16)
    return [A, B]


def get_init_inputs():
    return []
