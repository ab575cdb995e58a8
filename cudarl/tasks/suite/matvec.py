import torch
import torch.nn as nn

M = 16384
K = 4096  # A is 64M floats (256 MiB)


class Model(nn.Module):
    """Matrix-vector product y = A @ x, A [M, K], x [K] -> y [M]."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


def get_inputs():
    A = torch.randn(M, K)
    x = torch.randn(K)
    return [A, x]


def get_init_inputs():
    return []
