import torch
import torch.nn as nn

BATCH = 4
HEADS = 16
SEQ_LEN = 1024
HEAD_DIM = 64


class Model(nn.Module):
    """Scaled dot-product attention, non-causal: softmax(Q @ K^T / sqrt(d)) @ V.

    Q, K, V are [BATCH, HEADS, SEQ_LEN, HEAD_DIM]; the output has the same shape.
    """

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scale = 1.0 / (q.size(-1) ** 0.5)
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, v)


def get_inputs():
    q = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM)
    k = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM)
    v = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM)
    return [q, k, v]


def get_init_inputs():
    return []
