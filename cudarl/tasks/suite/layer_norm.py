import torch
import torch.nn as nn

M = 8192
N = 4096


class Model(nn.Module):
    """LayerNorm over the last dimension, with learnable weight and bias."""

    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    x = torch.randn(M, N)
    return [x]


def get_init_inputs():
    return [(N,)]
