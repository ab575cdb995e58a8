import torch
import torch.nn as nn

BATCH = 32
IN_CHANNELS = 128
OUT_CHANNELS = 128
LENGTH = 4096


class Model(nn.Module):
    """1-D convolution, kernel size 5, stride 1, zero padding 2 (same length), with bias. [N, C, L]."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(BATCH, IN_CHANNELS, LENGTH)
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
