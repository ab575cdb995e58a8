import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 32
HEIGHT = 256
WIDTH = 256  # 64M floats (256 MiB)
ALPHA = 1.3


class Model(nn.Module):
    """ELU: x if x > 0 else alpha * (exp(x) - 1), on an NCHW activation tensor."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.elu(x, alpha=self.alpha)


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2.0
    return [x]


def get_init_inputs():
    return [ALPHA]
