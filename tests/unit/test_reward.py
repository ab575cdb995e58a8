"""Rewards and returns against hand-computed values (``cudarl.reward``)."""

from __future__ import annotations

import math

import pytest

from cudarl.config_base import ConfigError
from cudarl.config_rl import RewardConfig
from cudarl.reward import KIND_OF_OUTCOME, discounted_returns, turn_reward
from cudarl.tester.verdict import (
    CompileReport,
    HardeningReport,
    KernelResources,
    Outcome,
    TimingReport,
    TimingStats,
    Verdict,
)


def _verdict(outcome: Outcome, speedup: float | None = None, coverage: float | None = None,
             spill_bytes: int = 0) -> Verdict:
    verdict = Verdict.begin("vector_add", "c", "hash").conclude(outcome, "" if outcome == Outcome.PASSED else "why")
    verdict.compile = CompileReport(mode="inline", arch="sm_90", cache_key="k", cached=False, seconds=1.0,
                                    kernels=[KernelResources(name="k", mangled_name="_Z1k", arch="sm_90",
                                                             spill_store_bytes=spill_bytes)])
    if speedup is not None:
        stats = TimingStats(median_ms=1.0, mean_ms=1.0, stdev_ms=0.0, min_ms=1.0, count=10, rse=0.0)
        verdict.timing = TimingReport(candidate=stats, reference=stats, speedup=speedup, l2_flush_bytes=0,
                                      device="gpu")
    if coverage is not None:
        verdict.hardening = HardeningReport(own_time_share=coverage)
    return verdict


def test_every_outcome_has_a_reward_kind():
    assert set(KIND_OF_OUTCOME) == set(Outcome)


@pytest.mark.parametrize(("speedup", "expected"), [
    (2.0, 1.5),  # 1 + 0.5 * log2(2)
    (0.25, 0.5),  # log2 = -2, clipped to -1: 1 - 0.5
    (100.0, 2.5),  # log2 = 6.64, clipped to 3: 1 + 1.5
    (1.0, 1.0),
    (None, 1.0),  # correct with timing off: no speedup term
])
def test_a_correct_kernel_earns_the_base_plus_a_clipped_log_speedup(speedup, expected):
    outcome = Outcome.PASSED if speedup is not None else Outcome.CORRECT
    reward = turn_reward(_verdict(outcome, speedup), RewardConfig())
    assert (reward.kind, reward.counted) == ("correct", True)
    assert reward.value == pytest.approx(expected)


def test_coverage_and_spills_move_a_correct_kernels_reward():
    config = RewardConfig(coverage_weight=0.2, spill_penalty=0.3)
    reward = turn_reward(_verdict(Outcome.PASSED, 2.0, coverage=0.5, spill_bytes=8), config)
    assert reward.terms == pytest.approx({"correct": 1.0, "speedup": 0.5, "coverage": 0.1, "spills": -0.3})
    assert reward.value == pytest.approx(1.3)


@pytest.mark.parametrize(("outcome", "kind", "expected"), [
    (Outcome.FORMAT_ERROR, "format_error", -0.5),
    (Outcome.COMPILE_ERROR, "compile_failure", -0.2),
    (Outcome.LOAD_ERROR, "compile_failure", -0.2),
    (Outcome.INCORRECT, "incorrect", -0.1),
    (Outcome.TIMEOUT, "incorrect", -0.1),
    (Outcome.REJECTED, "rejected", -1.0),
    (Outcome.COMPILED, "compiled_only", 0.0),
])
def test_failures_earn_their_configured_reward_and_stay_distinguishable(outcome, kind, expected):
    config = RewardConfig(format_error=-0.5, compile_failure=-0.2, incorrect=-0.1, rejected=-1.0)
    reward = turn_reward(_verdict(outcome, speedup=4.0), config)  # a speedup on a failure earns nothing
    assert (reward.kind, reward.value, reward.counted) == (kind, expected, True)


def test_a_harness_error_is_left_out_not_punished():
    reward = turn_reward(_verdict(Outcome.HARNESS_ERROR), RewardConfig(incorrect=-1.0))
    assert (reward.kind, reward.value, reward.counted) == ("harness_error", 0.0, False)


def test_a_config_where_failing_pays_more_than_a_slow_correct_kernel_is_refused():
    RewardConfig(correct=1.0, speedup_weight=0.5, incorrect=0.3)  # a slow correct kernel: 1 - 0.5 > 0.3
    with pytest.raises(ValueError, match=r"correct but slow kernel would earn 0.5, no more than a failing one \(0.6\)"):
        RewardConfig(correct=1.0, speedup_weight=0.5, incorrect=0.6)
    with pytest.raises(ConfigError, match="raise `correct`"):
        RewardConfig().with_changes({"correct": 0.4, "incorrect": 0.0, "speedup_weight": 0.5})


def test_the_five_part_preset_weighs_its_parts():
    config = RewardConfig(preset="five_part", rejected=-1.0)
    passed = turn_reward(_verdict(Outcome.PASSED, 2.0, coverage=0.8), config)
    # performance: (log2(2) - (-1)) / (3 - (-1)) = 0.5
    assert passed.terms == pytest.approx({"compile": 0.3, "correctness": 0.3, "performance": 0.125,
                                          "efficiency": 0.1, "quality": 0.04})
    assert passed.value == pytest.approx(0.865)
    spilled = turn_reward(_verdict(Outcome.PASSED, 2.0, coverage=0.8, spill_bytes=4), config)
    assert spilled.value == pytest.approx(0.765)
    assert turn_reward(_verdict(Outcome.INCORRECT), config).value == pytest.approx(0.3)  # it built
    assert turn_reward(_verdict(Outcome.COMPILE_ERROR), config).value == 0.0
    assert turn_reward(_verdict(Outcome.REJECTED), config).value == -1.0  # a hack earns no compile points


def test_returns_discount_later_turns():
    assert discounted_returns([1.0, 0.0, 2.0], 0.4) == pytest.approx([1.32, 0.8, 2.0])  # 1 + 0.4 * (0 + 0.4 * 2)
    assert discounted_returns([1.0, 0.0, 2.0], 0.0) == [1.0, 0.0, 2.0]
    assert discounted_returns([1.0, 0.0, 2.0], 1.0) == [3.0, 2.0, 2.0]
    assert discounted_returns([], 0.4) == []
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([1.0], 1.5)


def test_nonsense_speedups_earn_no_speed_term():
    for speedup in (0.0, -1.0, math.inf, math.nan):
        assert turn_reward(_verdict(Outcome.PASSED, speedup), RewardConfig()).value == 1.0
