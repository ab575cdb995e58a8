"""What the update workers train on: one ``TrainSample`` per policy turn, built from the engine's
own token ids and log-probs (never re-tokenized), and its padded tensors.

Alignment: a causal model's logits at position ``t`` score token ``t + 1``, so every per-token
tensor here has one column per *predicted* position: column ``t`` holds what concerns token
``t + 1``. A response occupying positions ``P .. L-1`` of a sequence of length ``L`` (``P`` the
prompt's length) is columns ``P-1 .. L-2``. ``collate`` puts the engine's log-probs, the mask
and the advantage on exactly those columns, and ``token_logprobs`` reads the model's there.

Covered: samples, sharding over ranks with global counts, collation, log-probs of a batch. Not
covered: the update itself (``update``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudarl.rl.loss import BatchCounts

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TrainSample:
    """One turn to learn from."""

    token_ids: tuple[int, ...]  # prompt + response, as the engine saw and produced them
    prompt_length: int
    old_logprobs: tuple[float, ...]  # the engine's log-probs of the response tokens
    advantage: float
    weights_version: int  # the weights that generated the response
    adapter: str | None = None  # the role's adapter that generated it (None: the base weights)

    def __post_init__(self) -> None:
        responses = len(self.token_ids) - self.prompt_length
        if self.prompt_length < 1 or responses < 1:
            raise ValueError(f"a sample needs a prompt and a response: {self.prompt_length} prompt tokens "
                             f"of {len(self.token_ids)}")
        if len(self.old_logprobs) != responses:
            raise ValueError(f"{responses} response tokens but {len(self.old_logprobs)} log-probs")

    @property
    def response_length(self) -> int:
        return len(self.token_ids) - self.prompt_length


def sample_from_generation(generation, advantage: float) -> TrainSample:
    """A single-turn sample: the engine's own prompt and response ids, log-probs, version and adapter."""
    return TrainSample(token_ids=tuple(generation.prompt_ids) + tuple(generation.token_ids),
                       prompt_length=len(generation.prompt_ids), old_logprobs=tuple(generation.logprobs),
                       advantage=advantage, weights_version=generation.weights_version, adapter=generation.adapter)


def batch_counts(samples: Sequence[TrainSample], ranks: int = 1) -> BatchCounts:
    """The step's global counts (every rank's loss divides by these)."""
    return BatchCounts(tokens=sum(s.response_length for s in samples), sequences=len(samples), ranks=ranks)


def deal(samples: Sequence[TrainSample], ranks: int) -> list[list[TrainSample]]:
    """Samples dealt over ranks, longest first in turn so token counts stay even (a rank may get
    none: the updater then runs empty micro-batches to keep the ranks' collectives in step)."""
    order = sorted(range(len(samples)), key=lambda i: -len(samples[i].token_ids))
    shards: list[list[TrainSample]] = [[] for _ in range(ranks)]
    for position, index in enumerate(order):
        shards[position % ranks].append(samples[index])
    return shards


def collate(samples: Sequence[TrainSample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors: ``input_ids`` and ``attention_mask`` (samples, L); ``response_mask``,
    ``old_logprobs`` and ``advantages`` (samples, L - 1), on the predicted-position columns."""
    import torch

    length = max(len(s.token_ids) for s in samples)
    input_ids = torch.full((len(samples), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), length), dtype=torch.long)
    mask = torch.zeros((len(samples), length - 1), dtype=torch.float32)
    old = torch.zeros((len(samples), length - 1), dtype=torch.float32)
    advantages = torch.zeros((len(samples), length - 1), dtype=torch.float32)
    for row, sample in enumerate(samples):
        end = len(sample.token_ids)
        input_ids[row, :end] = torch.tensor(sample.token_ids)
        attention[row, :end] = 1
        columns = slice(sample.prompt_length - 1, end - 1)
        mask[row, columns] = 1.0
        old[row, columns] = torch.tensor(sample.old_logprobs)
        advantages[row, columns] = sample.advantage
    return {"input_ids": input_ids, "attention_mask": attention, "response_mask": mask, "old_logprobs": old,
            "advantages": advantages}


LOGPROB_CHUNK = 512
"""Positions per chunk of ``token_logprobs``: its fp32 work tensors are (samples, chunk, vocab)."""


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   temperature: float = 1.0) -> torch.Tensor:
    """The model's log-prob of each next token, (samples, L - 1), in fp32, under the sampling
    ``temperature`` (the engine's log-probs are of the tempered distribution it sampled from,
    so the ratio must compare like with like)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    targets = input_ids[:, 1:]

    def chosen(piece: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:  # log_softmax(x)[t] = x[t] - logsumexp(x)
        piece = piece.float() if temperature == 1.0 else piece.float() / temperature
        return piece.gather(-1, wanted[..., None]).squeeze(-1) - torch.logsumexp(piece, dim=-1)

    # Position chunks, each recomputed in the backward pass instead of kept: the fp32 copies of a
    # (samples, L, vocab) logits tensor would otherwise all stay alive (about 10 GB at 4 x 4096
    # positions and a 152k vocabulary); this way one chunk's is.
    pieces = [checkpoint(chosen, logits[:, start:start + LOGPROB_CHUNK], targets[:, start:start + LOGPROB_CHUNK],
                         use_reentrant=False) if torch.is_grad_enabled() else
              chosen(logits[:, start:start + LOGPROB_CHUNK], targets[:, start:start + LOGPROB_CHUNK])
              for start in range(0, targets.shape[1], LOGPROB_CHUNK)]
    return torch.cat(pieces, dim=1)
