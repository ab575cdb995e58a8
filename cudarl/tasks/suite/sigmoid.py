import torch
import torch.nn as nn

N = 1 << 26  # 67,108,864 floats (256 MiB)


class Model(nn.Module):
    """Elementwise logistic sigmoid: 1 / (1 + exp(-x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)


def get_inputs():
    # Spread of +-16 reaches both saturated ends as well as the steep middle.
    x = torch.randn(N) * 4.0
    return [x]


def get_init_inputs():
    return []
