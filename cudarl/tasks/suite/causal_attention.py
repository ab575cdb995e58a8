import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
HEADS = 16
SEQ_LEN = 2048
HEAD_DIM = 64


class Model(nn.Module):
    """Causal scaled dot-product attention in float16: softmax(Q @ K^T / sqrt(d) + mask) @ V.

    Q, K, V are [BATCH, HEADS, SEQ_LEN, HEAD_DIM] float16; query i attends to keys 0..i.
    The output has the same shape and dtype.
    """

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    q = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.float16)
    k = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.float16)
    v = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.float16)
    return [q, k, v]


def get_init_inputs():
    return []
