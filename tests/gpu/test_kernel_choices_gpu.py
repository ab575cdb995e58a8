"""The kernel grids (``cudarl.rl.kernel_choices``) judged with full verdicts on a GPU: every
deliberately wrong choice fails the correctness check, every other choice passes, and in each
task the fastest choice is at least 1.5x the slowest, so a policy picking among them has
something to learn. Prints the grid with the measured speedups (``-s``)."""

from __future__ import annotations

import pytest

from cudarl.rl.kernel_choices import TASKS, choices
from cudarl.rl.kernel_learning import measure_choices
from cudarl.rl.local_judge import LocalJudge
from cudarl.tester import Outcome

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def grid(gpu_tester, tasks) -> list[dict]:
    rows = measure_choices(LocalJudge(gpu_tester, build_workers=8, judge_workers=2), tasks)
    print(f"\n{'task':11s} {'#':>2s} {'choice':34s} {'expect':6s} {'outcome':12s} {'speedup':>8s} {'ms':>9s}")
    for row in rows:
        speedup = f"{row['speedup']:.3f}" if row["speedup"] is not None else "-"
        ms = f"{row['candidate_ms']:.4f}" if row["candidate_ms"] is not None else "-"
        print(
            f"{row['task']:11s} {row['index']:2d} {row['name']:34s} {row['expect']:6s} {row['outcome']:12s} "
            f"{speedup:>8s} {ms:>9s} {'; '.join(row['reasons'])[:80]}"
        )
    return rows


def test_the_wrong_choices_fail_correctness_and_the_others_pass(grid):
    assert len(grid) == sum(len(choices(t)) for t in TASKS)
    for row in grid:
        if row["expect"] == "wrong":
            assert row["outcome"] == Outcome.INCORRECT.value, row
        else:
            assert row["outcome"] == Outcome.PASSED.value, row
            assert row["speedup"] is not None and row["speedup"] > 0, row


@pytest.mark.parametrize("task_id", TASKS)
def test_the_fastest_choice_is_well_ahead_of_the_slowest(grid, task_id):
    speedups = [row["speedup"] for row in grid if row["task"] == task_id and row["outcome"] == Outcome.PASSED.value]
    assert len(speedups) >= 2
    assert max(speedups) >= 1.5 * min(speedups), speedups


@pytest.mark.parametrize("task_id", TASKS)
def test_the_fastest_choice_is_not_one_expected_slow(grid, task_id):
    rows = [row for row in grid if row["task"] == task_id and row["outcome"] == Outcome.PASSED.value]
    fastest = max(rows, key=lambda row: row["speedup"])
    assert fastest["expect"] != "slow", fastest
