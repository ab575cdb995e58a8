import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
H = 256
W = 256


class Model(nn.Module):
    """nn.MaxPool2d(kernel_size=2, stride=2) on an NCHW tensor."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, H, W)
    return [x]


def get_init_inputs():
    return []
