import torch
import torch.nn as nn

M = 8192
N = 4096  # two inputs of 32M floats (128 MiB each)


class Model(nn.Module):
    """Mean squared error between two tensors, reduced to a scalar."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(predictions, targets)


def get_inputs():
    # Each call draws its own scale: with plain randn inputs the loss is 2.0 to within 1e-4 for
    # every seed, so a kernel returning the constant 2.0 would pass (a degenerate task).
    scale = 0.5 + 2.0 * torch.rand(())
    predictions = torch.randn(M, N) * scale
    targets = torch.randn(M, N)
    return [predictions, targets]


def get_init_inputs():
    return []
