"""Rewards from verdicts, and multi-turn returns: pure functions, every weight in ``RewardConfig``.

Why gated: a reward that pays for compiling or for partial output teaches a policy to compile
nothing useful; one that pays for speed without correctness teaches it to return zeros. So a
turn earns nothing (or a configured penalty) unless its candidate compiled and passed, and the
failure kinds stay distinct (``TurnReward.kind``) so logs and metrics tell a format error from a
rejection. The speedup term is ``log2``: twice as fast and twice as slow move the reward by the
same amount, and clipping keeps one noisy timing from dominating its group.

Covered: the ``gated`` and ``five_part`` presets, the failure kinds, returns discounted over
turns. Not covered: advantages and losses (``cudarl.rl``), aggregation over a step (the
``RewardAggregator`` actor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cudarl.config_rl import RewardConfig
from cudarl.tester.verdict import Outcome, Verdict

KIND_OF_OUTCOME: Mapping[Outcome, str] = {
    Outcome.PASSED: "correct", Outcome.CORRECT: "correct",
    Outcome.COMPILED: "compiled_only",
    Outcome.FORMAT_ERROR: "format_error",
    Outcome.PARSE_ERROR: "compile_failure", Outcome.COMPILE_ERROR: "compile_failure",
    Outcome.COMPILE_TIMEOUT: "compile_failure", Outcome.LOAD_ERROR: "compile_failure",
    Outcome.INCORRECT: "incorrect", Outcome.RUNTIME_ERROR: "incorrect", Outcome.CUDA_ERROR: "incorrect",
    Outcome.CRASHED: "incorrect", Outcome.TIMEOUT: "incorrect", Outcome.MEMORY_LIMIT: "incorrect",
    Outcome.RESOURCE_LIMIT: "incorrect",
    Outcome.REJECTED: "rejected",
    Outcome.HARNESS_ERROR: "harness_error",
}
"""Every outcome's reward kind (a new outcome without one fails ``tests/unit/test_reward.py``)."""

FIVE_PART_WEIGHTS: Mapping[str, float] = {
    "compile": 0.30, "correctness": 0.30, "performance": 0.25, "efficiency": 0.10, "quality": 0.05}


@dataclass(frozen=True)
class TurnReward:
    """One turn's reward. ``counted`` is False when the tester itself failed (``harness_error``):
    not the policy's doing, so the sample is left out of the loss rather than punished."""

    value: float
    kind: str  # "correct", "compiled_only", "format_error", "compile_failure", "incorrect", "rejected", "harness_error"
    terms: Mapping[str, float] = field(default_factory=dict)
    counted: bool = True


def clipped_log2_speedup(speedup: float | None, config: RewardConfig) -> float:
    """``log2(speedup)`` clipped to the configured range; 0 when not timed (timing off)."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return 0.0
    return min(max(math.log2(speedup), config.speedup_log2_min), config.speedup_log2_max)


def spills(verdict: Verdict) -> bool:
    """Whether any of the candidate's kernels spills registers (from the compiler's report)."""
    kernels = verdict.compile.kernels if verdict.compile else []
    return any(k.spill_store_bytes or k.spill_load_bytes for k in kernels)


def coverage(verdict: Verdict) -> float:
    """Share of forward's GPU time in the candidate's own kernels (0 when not measured)."""
    share = verdict.hardening.own_time_share if verdict.hardening else None
    return min(max(share, 0.0), 1.0) if share is not None else 0.0


def turn_reward(verdict: Verdict, config: RewardConfig) -> TurnReward:
    """The reward of one judged candidate under ``config``."""
    kind = KIND_OF_OUTCOME[Outcome(verdict.outcome)]
    if kind == "harness_error":
        return TurnReward(0.0, kind, counted=False)
    if config.preset == "five_part":
        return _five_part(verdict, kind, config)
    if kind != "correct":
        return TurnReward(_failure_reward(kind, config), kind)
    terms = {"correct": config.correct,
             "speedup": config.speedup_weight * clipped_log2_speedup(verdict.speedup, config),
             "coverage": config.coverage_weight * coverage(verdict),
             "spills": -config.spill_penalty if spills(verdict) else 0.0}
    return TurnReward(sum(terms.values()), kind, terms)


def _failure_reward(kind: str, config: RewardConfig) -> float:
    return {"compiled_only": 0.0, "format_error": config.format_error, "compile_failure": config.compile_failure,
            "incorrect": config.incorrect, "rejected": config.rejected}[kind]


def _five_part(verdict: Verdict, kind: str, config: RewardConfig) -> TurnReward:
    """The seeds' weighted reward. Parts, each in [0, 1]: compile (it built: every kind past the
    build), correctness, performance (the clipped log2 speedup mapped onto [0, 1]), efficiency
    (correct and no register spills), quality (correct: the own-kernel share of GPU time).
    Rejections and format errors get their configured rewards: a hack earns no compile points."""
    if kind in ("rejected", "format_error"):
        return TurnReward(_failure_reward(kind, config), kind)
    correct = kind == "correct"
    span = config.speedup_log2_max - config.speedup_log2_min
    performance = (clipped_log2_speedup(verdict.speedup, config) - config.speedup_log2_min) / span if span else 1.0
    parts = {"compile": 0.0 if kind == "compile_failure" else 1.0,
             "correctness": 1.0 if correct else 0.0,
             "performance": performance if correct and verdict.speedup is not None else 0.0,
             "efficiency": 1.0 if correct and not spills(verdict) else 0.0,
             "quality": coverage(verdict) if correct else 0.0}
    terms = {name: FIVE_PART_WEIGHTS[name] * value for name, value in parts.items()}
    return TurnReward(sum(terms.values()), kind, terms)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Each turn's return: its reward plus later turns' rewards, each discounted by ``gamma`` per
    turn of distance (``G_t = r_t + gamma * G_{t+1}``). ``gamma = 0``: each turn on its own."""
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], not {gamma}")
    returns: list[float] = []
    following = 0.0
    for reward in reversed(rewards):
        following = reward + gamma * following
        returns.append(following)
    return returns[::-1]
