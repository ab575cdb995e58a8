import torch
import torch.nn as nn

BATCH = 4096
HIDDEN = 2048
OUT_FEATURES = 2048


class Model(nn.Module):
    """RMSNorm over the last dimension (learnable weight, eps 1e-6), then a Linear layer with bias."""

    def __init__(self, hidden, out_features):
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=1e-6)
        self.linear = nn.Linear(hidden, out_features)
        # A non-trivial norm weight, so a kernel that ignores it is caught.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x))


def get_inputs():
    x = torch.randn(BATCH, HIDDEN)
    return [x]


def get_init_inputs():
    return [HIDDEN, OUT_FEATURES]
