import torch
import torch.nn as nn

BATCH = 16
M = 1024
K = 512
N = 1024


class Model(nn.Module):
    """Batched matrix product: C[b] = A[b] @ B[b], A [BATCH, M, K], B [BATCH, K, N]."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    A = torch.randn(BATCH, M, K)
    B = torch.randn(BATCH, K, N)
    return [A, B]


def get_init_inputs():
    return []
