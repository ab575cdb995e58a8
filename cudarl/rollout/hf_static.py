"""The transformers engine's GPU decoder: ``model.generate`` with a static KV cache, so the library
compiles the decode step (``torch.compile``, CUDA graphs), and a sampling logits processor that
records each sampled token's log-prob.

Why not the library's continuous batching on a GPU: without flash-attention kernels (none can be
installed on a machine with no hub access) it runs SDPA over the whole concatenated batch with a
dense mask, so a step costs about batch² x length; measured on one H200 for a 1.5B model with 256
new tokens, it reached 1.7x plain ``generate`` at batch 64 and was slower than plain ``generate``
at batch 256 (``benchmarks/rollout.py``). Plain ``generate`` in turn spends its time launching
kernels one by one; a compiled decode step replays them as one graph.

Why sample in a processor: ``generate`` can return per-step scores only as batch x vocabulary
tensors (about 40 GB for 256 sequences x 256 steps of a 152k vocabulary). The processor applies
temperature and top-p (the library's warpers), samples with its own seeded generator (so a call
does not move the process's random state), keeps the sampled token's log-prob and hands
``generate`` a one-hot score that its greedy step picks. The log-probs are therefore of the
distribution sampled from, as the continuous-batching path's are.

Shapes are bucketed (batch and cache length to powers of two; the library never shrinks a
model's static cache between calls) so a run of RL steps, whose prompts grow turn by turn,
compiles a handful of graphs, not one per call: each new shape costs a compile (about 30 s for a
1.5B model on an H200, measured) before it runs at full speed. Covered: left-padded prompts of different
lengths, stop tokens per sequence, greedy and sampled decoding. Not covered: beams, several
adapters in one batch, CPU compilation (on a CPU the same loop runs eagerly).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

MIN_CACHE_LENGTH = 256


@dataclass(frozen=True)
class Decoded:
    """One sequence's new tokens (cut after its first stop token) and their log-probs."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    stopped: bool


class _SampleAndRecord:
    """A logits processor that samples (temperature, top-p; greedy at temperature 0) and records
    the log-prob of the token sampled; returns scores that make ``generate``'s greedy step pick it."""

    def __init__(self, temperature: float, top_p: float, generator: torch.Generator, real_rows: int,
                 stop_id: int | None) -> None:
        from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

        self.warpers = []
        if temperature > 0:  # the warpers refuse ints
            self.warpers.append(TemperatureLogitsWarper(float(temperature)))
            if top_p < 1.0:
                self.warpers.append(TopPLogitsWarper(float(top_p)))
        self.greedy = temperature == 0
        self.generator = generator
        self.real_rows = real_rows  # rows past it only fill the batch bucket: they stop at once
        self.stop_id = stop_id
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.float()
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        logprobs = torch.log_softmax(scores, dim=-1)
        if self.greedy:
            chosen = scores.argmax(dim=-1, keepdim=True)
        else:
            chosen = torch.multinomial(logprobs.exp(), 1, generator=self.generator)
        if self.stop_id is not None and self.real_rows < chosen.shape[0]:  # or they would keep the loop going
            chosen[self.real_rows:] = self.stop_id
        self.logprobs.append(logprobs.gather(-1, chosen)[:, 0])
        return torch.full_like(scores, float("-inf")).scatter_(-1, chosen, 0.0)


def _power_of_two(size: int) -> int:
    return 1 << (size - 1).bit_length()


@contextmanager
def _clean_generation_config(model):
    """Run ``generate`` under a default ``GenerationConfig``: the library fills every field a call
    leaves unset from the model's own (a checkpoint's repetition penalty or top-k would otherwise
    reshape the distribution the recorded log-probs claim to be from)."""
    from transformers import GenerationConfig

    saved = model.generation_config
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved


@contextmanager
def _grouped_decode_attention(model):
    """SDPA with grouped heads packed in one-token steps (``_compat.grouped_decode_attention``
    says why) for this call only: the model may be shared with a continuous-batching engine or a
    trainer, which accept only the library's own implementations."""
    from cudarl._compat import grouped_decode_attention

    saved = model.config._attn_implementation
    if saved != "sdpa":
        yield
        return
    model.set_attn_implementation(grouped_decode_attention())
    try:
        yield
    finally:
        model.set_attn_implementation(saved)


def decode_static(model, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float,
                  seed: int | None, stop_ids: set[int], pad_token_id: int | None) -> list[Decoded]:
    """Sample ``max_new_tokens`` (or until a stop token) after each prompt, in the prompts' order."""
    from transformers import CompileConfig, GenerationConfig, LogitsProcessorList

    from cudarl._compat import allow_decode_recompiles

    allow_decode_recompiles()
    device = next(model.parameters()).device
    rows = _power_of_two(len(prompts))
    padded_prompts = list(prompts) + [prompts[0]] * (rows - len(prompts))  # extra rows are dropped below
    width = max(len(p) for p in padded_prompts)
    pad = pad_token_id if pad_token_id is not None else 0
    ids = torch.full((rows, width), pad, dtype=torch.long)
    mask = torch.zeros((rows, width), dtype=torch.long)
    for row, prompt in enumerate(padded_prompts):  # left padding: every prompt ends at the last column
        ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt):] = 1
    generator = torch.Generator(device=device)
    generator.manual_seed(seed if seed is not None else secrets.randbits(62))  # the process's generator untouched
    sampler = _SampleAndRecord(temperature, top_p, generator, len(prompts), min(stop_ids) if stop_ids else None)
    cache_length = max(MIN_CACHE_LENGTH, _power_of_two(width + max_new_tokens))
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                              eos_token_id=sorted(stop_ids) or None, pad_token_id=pad,
                              cache_implementation="static", max_cache_len=cache_length,
                              compile_config=CompileConfig(dynamic=False) if device.type == "cuda" else None)
    with torch.inference_mode(), _clean_generation_config(model), _grouped_decode_attention(model):
        sequences = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config,
                                   logits_processor=LogitsProcessorList([sampler]))
    new = sequences[:len(prompts), width:].tolist()
    logprobs = torch.stack(sampler.logprobs, dim=1)[:len(prompts)].tolist() if sampler.logprobs else [[]] * len(prompts)
    decoded = []
    for tokens, row_logprobs in zip(new, logprobs):
        end = next((i + 1 for i, token in enumerate(tokens) if token in stop_ids), len(tokens))
        decoded.append(Decoded(token_ids=tuple(int(t) for t in tokens[:end]),
                               logprobs=tuple(float(x) for x in row_logprobs[:end]),
                               stopped=bool(tokens) and tokens[end - 1] in stop_ids))
    return decoded
