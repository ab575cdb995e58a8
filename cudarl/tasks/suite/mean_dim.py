import torch
import torch.nn as nn

B = 32
M = 512
N = 4096  # 64M floats (256 MiB)


class Model(nn.Module):
    """Mean over the last dimension of a 3-D tensor: [B, M, N] -> [B, M]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-1)


def get_inputs():
    x = torch.randn(B, M, N)
    return [x]


def get_init_inputs():
    return []
