import torch
import torch.nn as nn

M = 16384
N = 4096


class Model(nn.Module):
    """RMSNorm over the last dimension of a bfloat16 tensor, with a bfloat16 weight.

    The statistics and the scaling are computed in float32 and the result is
    rounded to bfloat16 once at the end: y = bf16(x / sqrt(mean(x^2) + eps) * weight).
    The weight is initialised randomly in [0.5, 1.5) (instead of the usual
    ones) so that a kernel which forgets to apply it gives wrong results.
    """

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((torch.rand(hidden_size) + 0.5).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * rms * self.weight.float()).to(x.dtype)


def get_inputs():
    x = torch.randn(M, N, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [N]
