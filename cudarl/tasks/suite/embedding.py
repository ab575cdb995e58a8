import torch
import torch.nn as nn

NUM_EMBEDDINGS = 32768
EMBEDDING_DIM = 1024  # the table is 32M floats (128 MiB)
BATCH = 64
SEQ = 1024  # output [64, 1024, 1024]: 64M floats (256 MiB)


class Model(nn.Module):
    """nn.Embedding lookup: int64 indices [BATCH, SEQ] -> [BATCH, SEQ, EMBEDDING_DIM]."""

    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.embedding(indices)


def get_inputs():
    indices = torch.randint(0, NUM_EMBEDDINGS, (BATCH, SEQ))
    return [indices]


def get_init_inputs():
    return [NUM_EMBEDDINGS, EMBEDDING_DIM]
