import torch
import torch.nn as nn

# 64M elements. Rows of 1024 keep the outputs (about 1/1700 on average)
# well above the fp32 absolute tolerance of 1e-4, so a kernel that gets the
# values wrong cannot hide behind atol the way it could with 8192-wide rows.
M = 65536
N = 1024


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    x = torch.randn(M, N)
    return [x]


def get_init_inputs():
    return []
