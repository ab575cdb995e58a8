import torch
import torch.nn as nn

M = 2048
K = 2048
N = 2048


class Model(nn.Module):
    """Dense matrix product C = A @ B, A [M, K], B [K, N]."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
