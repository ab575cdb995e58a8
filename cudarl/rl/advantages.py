"""Advantages of turn samples from their returns, on verl's estimators applied per group.

Grouping: a group is the rollouts of one task in one step (the caller's group id). ``grpo``,
``grpo_unscaled`` and ``rloo`` compare every turn's return with all returns of its group;
``trloo`` compares a turn only with the same turn index of the group's other rollouts (later
turns are conditioned on earlier ones, so their returns are only comparable turn by turn).
verl gives a sample alone in its group its raw return as advantage; here it gets 0 and is
counted (``Advantages.alone``): a return with no peer carries no baseline and so no signal.

Covered: the four estimators and that rule. Not covered: returns (``cudarl.reward``), the loss.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

ESTIMATORS = ("grpo", "grpo_unscaled", "rloo", "trloo")


@dataclass(frozen=True)
class Advantages:
    values: tuple[float, ...]
    alone: int  # samples without a peer in their group (advantage 0)


def compute_advantages(returns: Sequence[float], groups: Sequence[str], turns: Sequence[int],
                       estimator: str) -> Advantages:
    """One advantage per sample; ``groups[i]`` and ``turns[i]`` say which rollout group and which
    turn of its episode sample ``i`` is."""
    import numpy as np
    import torch
    from verl.trainer.ppo import core_algos

    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {estimator!r}; known: {', '.join(ESTIMATORS)}")
    if not len(returns) == len(groups) == len(turns):
        raise ValueError(f"{len(returns)} returns, {len(groups)} group ids and {len(turns)} turn indices")
    if not returns:
        return Advantages((), 0)
    keys = [f"{g}\x00{t}" if estimator == "trloo" else str(g) for g, t in zip(groups, turns)]
    scores = torch.tensor([[float(r)] for r in returns], dtype=torch.float32)
    mask = torch.ones_like(scores)
    index = np.array(keys, dtype=object)
    if estimator.startswith("grpo"):
        values, _ = core_algos.compute_grpo_outcome_advantage(
            scores, mask, index, norm_adv_by_std_in_grpo=estimator == "grpo")
    else:
        values, _ = core_algos.compute_rloo_outcome_advantage(scores, mask, index)
    sizes = Counter(keys)
    advantages = tuple(0.0 if sizes[key] == 1 else float(value) for key, value in zip(keys, values[:, 0].tolist()))
    return Advantages(advantages, sum(1 for key in keys if sizes[key] == 1))
