"""The warm-start benchmark's steady rate, from progress lines, against hand-computed figures
(the GPU runs of ``benchmarks/sft.py`` report it, also for an arm cut by its time limit)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from sft import steady_rate  # noqa: E402


def test_rate_counts_only_the_steps_after_the_warmup():
    progress = [(1, 10.0, 1.0), (2, 11.0, 2.0), (3, 12.0, 2.5), (4, 12.5, 2.5), (5, 13.0, 2.5)]
    row = steady_rate(progress, warmup=2, tokens_per_step=100)
    # steps 3..5: 300 tokens in 13.0 - 11.0 = 2 s
    assert row == {"steps_done": 5, "steady_from_step": 2, "tokens_per_s": pytest.approx(150.0),
                   "peak_memory_gib": 2.5}


def test_too_few_steps_after_the_warmup_fall_back_to_every_step():
    row = steady_rate([(1, 4.0, 0.0), (2, 6.0, 0.0)], warmup=2, tokens_per_step=10)
    assert row == {"steps_done": 2, "steady_from_step": 0, "tokens_per_s": pytest.approx(20 / 6.0),
                   "peak_memory_gib": None}


def test_no_progress_gives_no_figures():
    assert steady_rate([], warmup=5, tokens_per_step=10) == {}
