import torch
import torch.nn as nn

M = 8192
N = 8192  # 64M floats (256 MiB)
SCALE = 1.7
SHIFT = -0.3


class Model(nn.Module):
    """Affine map with python-float constants: x * scale + shift."""

    def __init__(self, scale: float, shift: float):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.shift


def get_inputs():
    x = torch.randn(M, N)
    return [x]


def get_init_inputs():
    return [SCALE, SHIFT]
