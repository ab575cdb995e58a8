"""The policy loss of one micro-batch: verl's policy loss by name (PPO clip with clip-high by
default), plus an optional KL penalty to the reference policy, both aggregated by verl's
``agg_loss`` with the global token and sequence counts.

Why global counts: with token-mean, each data-parallel rank dividing by its own token count
weights tokens of short micro-batches more, and the loss then depends on how the batch was
split. Given the count over all ranks (and scaled by the rank count, which the gradient
all-reduce averages away), every rank's loss is its share of one global token mean: the sum
of gradients equals a single process's gradient on the whole batch (tested).

Covered: the loss and its metrics. Not covered: log-probs (the update worker computes them),
advantages (``advantages``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudarl.config_rl import AlgorithmConfig

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class BatchCounts:
    """Counts over the whole step's batch, all ranks: what the aggregation divides by."""

    tokens: int  # response tokens under the loss mask
    sequences: int  # samples with at least one such token
    ranks: int = 1  # data-parallel ranks the batch is split over


def policy_loss_names() -> tuple[str, ...]:
    """The policy losses verl registers (the config accepts a tested subset)."""
    from verl.trainer.ppo import core_algos

    return tuple(sorted(core_algos.POLICY_LOSS_REGISTRY))


def _actor_config(config: AlgorithmConfig, counts: BatchCounts):
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp2", rollout_n=1, ppo_micro_batch_size_per_gpu=1,
                       clip_ratio=config.clip_ratio_low, clip_ratio_low=config.clip_ratio_low,
                       clip_ratio_high=config.clip_ratio_high, clip_ratio_c=config.clip_ratio_c,
                       loss_agg_mode=config.loss_aggregation, use_torch_compile=False,
                       global_batch_info={"dp_size": counts.ranks, "batch_num_tokens": counts.tokens,
                                          "global_batch_size": counts.sequences})


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, config: AlgorithmConfig, counts: BatchCounts,
                ref_logprobs: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss to back-propagate for one micro-batch (tensors of shape (samples, tokens);
    ``advantages`` per token) and its metrics. ``ref_logprobs`` is needed when ``kl_coef > 0``."""
    from verl.trainer.ppo import core_algos

    if counts.tokens < 1 or counts.sequences < 1 or counts.ranks < 1:
        raise ValueError(f"batch counts must be positive: {counts}")
    shapes = {t.shape for t in (logprobs, old_logprobs, advantages, mask)}
    if len(shapes) != 1:
        raise ValueError(f"log-probs, old log-probs, advantages and mask differ in shape: {sorted(map(tuple, shapes))}")
    mask = mask.to(logprobs.dtype)
    loss_fn = core_algos.get_policy_loss_fn(config.policy_loss)
    loss, metrics = loss_fn(old_log_prob=old_logprobs, log_prob=logprobs, advantages=advantages,
                            response_mask=mask, loss_agg_mode=config.loss_aggregation,
                            config=_actor_config(config, counts))
    metrics = {name.removeprefix("actor/"): float(value) for name, value in metrics.items()}
    metrics["pg_loss"] = float(loss.detach())
    if config.kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs the reference policy's log-probs")
        kl = core_algos.kl_penalty(logprobs, ref_logprobs, kl_penalty=config.kl_type)
        kl_loss = core_algos.agg_loss(kl, mask, config.loss_aggregation, dp_size=counts.ranks,
                                      batch_num_tokens=counts.tokens, global_batch_size=counts.sequences)
        metrics["kl"] = float(kl_loss.detach())
        loss = loss + config.kl_coef * kl_loss
    return loss, metrics
