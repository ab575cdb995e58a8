import torch
import torch.nn as nn

N = 1 << 26  # 67,108,864 floats (256 MiB)
MIN_VAL = -0.5
MAX_VAL = 1.5


class Model(nn.Module):
    """Hardtanh with asymmetric bounds: clamp(x, min_val, max_val)."""

    def __init__(self, min_val: float, max_val: float):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


def get_inputs():
    x = torch.randn(N)
    return [x]


def get_init_inputs():
    return [MIN_VAL, MAX_VAL]
