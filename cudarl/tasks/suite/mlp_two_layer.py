import torch
import torch.nn as nn

BATCH = 4096
IN_FEATURES = 1024
HIDDEN_FEATURES = 2048
OUT_FEATURES = 1024


class Model(nn.Module):
    """Two-layer perceptron: Linear -> ReLU -> Linear."""

    def __init__(self, in_features, hidden_features, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    x = torch.randn(BATCH, IN_FEATURES)
    return [x]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN_FEATURES, OUT_FEATURES]
