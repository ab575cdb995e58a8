import torch
import torch.nn as nn

M = 2048
K = 2048
N = 2048


class Model(nn.Module):
    """Matrix product with the second operand transposed: C = A @ B.T, A [M, K], B [N, K]."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(N, K)
    return [A, B]


def get_init_inputs():
    return []
