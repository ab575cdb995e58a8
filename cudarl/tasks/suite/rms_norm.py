import torch
import torch.nn as nn

M = 16384
N = 4096


class Model(nn.Module):
    """RMSNorm over the last dimension with a learnable per-feature weight.

    y = x / sqrt(mean(x^2, dim=-1) + eps) * weight. The weight is initialised
    randomly in [0.5, 1.5) (instead of the usual ones) so that a kernel which
    forgets to apply it gives wrong results.
    """

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(hidden_size) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    x = torch.randn(M, N)
    return [x]


def get_init_inputs():
    return [N]
