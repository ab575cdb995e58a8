import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 8192
HIDDEN = 4096


class Model(nn.Module):
    """LayerNorm over the last dimension (learnable weight and bias), then exact (erf) GELU, in bfloat16."""

    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, dtype=torch.bfloat16)
        # Non-trivial affine parameters, so a kernel that ignores them is caught.
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.ln(x))


def get_inputs():
    x = torch.randn(ROWS, HIDDEN, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return [HIDDEN]
