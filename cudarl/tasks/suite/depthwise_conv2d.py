import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 128
HEIGHT = 128
WIDTH = 128


class Model(nn.Module):
    """Depthwise 2-D convolution (groups = channels), 3x3 kernel, stride 1, zero padding 1, with bias. NCHW."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)
    return [x]


def get_init_inputs():
    return [CHANNELS]
