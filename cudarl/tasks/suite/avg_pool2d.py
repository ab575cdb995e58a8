import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
H = 256
W = 256


class Model(nn.Module):
    """nn.AvgPool2d(kernel_size=3, stride=2, padding=1) on an NCHW tensor.

    Defaults otherwise: count_include_pad=True (padded zeros count, so every
    window is divided by 9) and ceil_mode=False.
    """

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, H, W)
    return [x]


def get_init_inputs():
    return []
