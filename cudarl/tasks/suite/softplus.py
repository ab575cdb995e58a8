import torch
import torch.nn as nn

M = 16384
N = 4096  # 64M floats (256 MiB)
BETA = 2.0
THRESHOLD = 20.0


class Model(nn.Module):
    """Softplus with beta and threshold: log(1 + exp(beta * x)) / beta, or x where beta * x > threshold."""

    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x, beta=self.beta, threshold=self.threshold)


def get_inputs():
    # Scaled so that a fraction of the inputs (x > 10) takes the linear branch.
    x = torch.randn(M, N) * 4.0
    return [x]


def get_init_inputs():
    return [BETA, THRESHOLD]
