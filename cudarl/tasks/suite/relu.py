import torch
import torch.nn as nn

N = 1 << 26  # 67,108,864 floats (256 MiB)


class Model(nn.Module):
    """Elementwise ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    x = torch.randn(N)
    return [x]


def get_init_inputs():
    return []
