import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 64
GROUPS = 8
H = 128
W = 128


class Model(nn.Module):
    """nn.GroupNorm on an NCHW tensor, with per-channel affine weight and bias.

    The affine parameters are perturbed away from their default (ones and
    zeros) right after construction, so a kernel that ignores them fails;
    a ModelNew must build nn.GroupNorm the same way and apply the same
    perturbation, in the same order, to get the same parameters.
    """

    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)
        with torch.no_grad():
            self.gn.weight.add_(0.5 * torch.randn(num_channels))
            self.gn.bias.add_(0.5 * torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, H, W)
    return [x]


def get_init_inputs():
    return [GROUPS, CHANNELS]
