"""The scaling benchmark's arithmetic (``benchmarks/update_scaling.py``): steady rates over the
steps after the warm-up, against hand-computed figures."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from update_scaling import steady  # noqa: E402


def test_steady_rates_leave_out_the_warmup_steps():
    lines = [(1, 9.0, 12.0), (2, 1.0, 2.0), (3, 3.0, 4.0)]  # (step, step seconds, round trip seconds)
    rates = steady(lines, warmup=1, tokens_per_step=1000)
    assert rates["steady_steps"] == 2 and rates["steps_done"] == 3
    assert rates["tokens_per_s"] == pytest.approx(2000 / 4.0)
    assert rates["round_trip_tokens_per_s"] == pytest.approx(2000 / 6.0)
    assert rates["step_s"] == pytest.approx(2.0)


def test_too_few_steps_fall_back_to_all_and_none_give_no_rate():
    assert steady([(1, 2.0, 4.0)], warmup=2, tokens_per_step=10)["tokens_per_s"] == pytest.approx(5.0)
    assert steady([], warmup=2, tokens_per_step=10)["tokens_per_s"] is None
