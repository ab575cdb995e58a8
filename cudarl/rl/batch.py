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

import weakref
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
                   temperature: float = 1.0, from_column: int = 0) -> torch.Tensor:
    """The model's log-prob of each next token, (samples, L - 1), in fp32, under the sampling
    ``temperature`` (the engine's log-probs are of the tempered distribution it sampled from,
    so the ratio must compare like with like).

    ``from_column``: the first column wanted (the shortest prompt's length - 1 in a batch of
    samples: the loss masks every column before it). Those columns are zeros without gradient
    and the output head and log-softmax skip them (with a prompt of an eighth of the sequence,
    an eighth of the head's work and of its fp32 work tensors); the decoder still reads them.

    Where the decoder and the output head can be called apart (``decoder_and_head``), the head
    runs per chunk of positions on the final hidden states, so the (samples, L, vocab) logits
    never exist whole: slicing a whole logits tensor into chunks costs, in the backward pass, a
    zero-filled full-size gradient per chunk (about a tenth of the 1.5B update's time at
    4 x 4096 positions, measured by ``benchmarks/grpo_step.py --profile-dir``). A model sharded by
    FSDP2 takes the whole forward instead: its root unit gathers the embeddings and the head
    only inside its own ``forward``; so does a model whose forward is more than the two."""
    import torch
    from torch.utils.checkpoint import checkpoint

    columns = input_ids.shape[1] - 1
    if not 0 <= from_column < columns:
        raise ValueError(f"from_column {from_column} outside the {columns} predicted positions")
    targets = input_ids[:, 1:]
    parts = decoder_and_head(model, input_ids)
    if parts is None:
        scores = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
        head = None
    else:
        decoder, head = parts
        scores = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]

    def chosen(logits: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:  # log_softmax(x)[t] = x[t] - logsumexp(x)
        logits = logits.float() if temperature == 1.0 else logits.float() / temperature
        return logits.gather(-1, wanted[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)

    # Position chunks whose fp32 work is recomputed in the backward pass instead of kept: the
    # fp32 copies of a (samples, L, vocab) logits tensor would otherwise all stay alive (about
    # 10 GB at 4 x 4096 positions and a 152k vocabulary); this way one chunk's is. The head's
    # bf16 output per chunk is kept (recomputing it too would cost another head matmul).
    pieces = [torch.zeros(input_ids.shape[0], from_column, dtype=torch.float32, device=input_ids.device)]
    for start in range(from_column, columns, LOGPROB_CHUNK):
        piece = scores[:, start:start + LOGPROB_CHUNK]
        logits = piece if head is None else head(piece)
        wanted = targets[:, start:start + LOGPROB_CHUNK]
        pieces.append(checkpoint(chosen, logits, wanted, use_reentrant=False) if torch.is_grad_enabled()
                      else chosen(logits, wanted))
    return torch.cat(pieces, dim=1)


_SPLIT_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""model -> whether its decoder and head, called apart, gave its own logits (checked once)."""


def decoder_and_head(model, probe_ids: torch.Tensor | None = None) -> tuple | None:
    """The model's decoder (returning ``last_hidden_state``) and output head, to be called apart,
    or None where they must not be: an FSDP2-sharded model, one without the two, or one whose
    forward does more than ``head(decoder(...))`` (a logit scale or soft cap). The last is
    checked, not assumed: at first use, on a few of ``probe_ids``' positions in eval mode, the
    split logits must equal the forward's."""
    import torch
    from torch.distributed.fsdp import FSDPModule

    if isinstance(model, FSDPModule):
        return None
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    get_decoder = getattr(inner, "get_decoder", None)
    get_head = getattr(inner, "get_output_embeddings", None)
    if get_decoder is None or get_head is None:
        return None
    decoder, head = get_decoder(), get_head()
    if decoder is None or head is None or decoder is inner:
        return None
    if model not in _SPLIT_CHECKED:
        if probe_ids is None:
            return None
        probe = probe_ids[:1, :16]
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                whole = model(input_ids=probe).logits.float()
                split = head(decoder(input_ids=probe).last_hidden_state).float()
        finally:
            model.train(was_training)
        _SPLIT_CHECKED[model] = whole.shape == split.shape and torch.allclose(whole, split, rtol=1e-2, atol=1e-2)
    return (decoder, head) if _SPLIT_CHECKED[model] else None
