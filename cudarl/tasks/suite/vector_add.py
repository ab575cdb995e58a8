import torch
import torch.nn as nn

N = 1 << 26  # 67,108,864 floats (256 MiB per tensor)


class Model(nn.Module):
    """Elementwise addition of two vectors: out = a + b."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def get_inputs():
    a = torch.randn(N)
    b = torch.randn(N)
    return [a, b]


def get_init_inputs():
    return []
