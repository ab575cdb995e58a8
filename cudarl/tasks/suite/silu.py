import torch
import torch.nn as nn

N = 1 << 26  # 67,108,864 floats (256 MiB)


class Model(nn.Module):
    """SiLU / swish, elementwise: x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x)


def get_inputs():
    x = torch.randn(N) * 3.0
    return [x]


def get_init_inputs():
    return []
