import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256  # 64M floats (256 MiB)
NEGATIVE_SLOPE = 0.1


class Model(nn.Module):
    """LeakyReLU: x if x > 0 else negative_slope * x, on an NCHW activation tensor."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [NEGATIVE_SLOPE]
