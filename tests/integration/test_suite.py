"""The built-in suite: its size and shape, and the degenerate-task check over every task
(references run on the CPU at their default and hidden shapes)."""

from __future__ import annotations

from collections import Counter

import pytest

from cudarl.config import CorrectnessConfig
from cudarl.tasks import Task
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tasks.checks import degenerate_reasons
from tests.conftest import run_cli
from tests.fixtures.tiny import TASK

SUITE = load_suite()


def test_suite_has_48_tasks_over_three_tiers_and_24_solutions_in_every_tier():
    tiers = Counter(t.tier for t in SUITE)
    assert len(SUITE) >= 48 and min(tiers.values()) >= 12, tiers
    by_id = {t.id: t for t in SUITE}
    solutions = suite_solutions()
    assert len(solutions) >= 24
    assert {by_id[s.task_id].tier for s in solutions} == {"easy", "medium", "hard"}
    assert all(t.hidden for t in SUITE), [t.id for t in SUITE if not t.hidden]
    assert {t.dtype for t in SUITE} >= {"float32", "float16", "bfloat16"}


def _tolerances(task: Task) -> tuple[float, float]:
    defaults = CorrectnessConfig()
    return task.tolerances(defaults.fp32_tolerance, defaults.half_tolerance)


@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_no_suite_task_is_degenerate_at_its_hidden_shapes(task: Task):
    """Every check, the second seed (input dependence) included, at the smaller hidden shapes."""
    assert degenerate_reasons(task, *_tolerances(task), hidden=True) == []


@pytest.mark.slow  # 15x the CPU time of the hidden shapes for 48 references
@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_no_suite_task_is_degenerate_at_its_default_shapes(task: Task):
    """The shapes the tester checks at; there the second seed runs only for small outputs, to
    keep the CPU time of 48 references in bounds."""
    assert degenerate_reasons(task, *_tolerances(task), check_inputs=None) == []


@pytest.mark.parametrize("body,reason", [
    ("return torch.tanh(a) * 1e-6", "nearly zero"),
    ("return torch.full_like(a, 3.0) + 1e-7 * b", "nearly constant"),
    ("return torch.ones(64) * 2.0 + torch.arange(64.0)", "barely depends on the inputs"),
    ("return (3.0 + 1e-9 * a.abs()).mean().reshape(1)", "barely depends on the inputs"),
])
def test_degenerate_tasks_are_flagged(body, reason):
    task = Task(id="bad", source=TASK.replace("return a + b", body))
    reasons = degenerate_reasons(task, 1e-4, 1e-4)
    assert reasons and reason in reasons[0]


def test_tasks_list_and_show_commands():
    listing = run_cli("tasks", "list")
    assert listing.returncode == 0, listing.stderr
    assert "vector_add" in listing.stdout and "tiers: {'easy':" in listing.stdout
    hard = run_cli("tasks", "list", "--tier", "hard")
    assert "matmul" in hard.stdout and "vector_add" not in hard.stdout
    shown = run_cli("tasks", "show", "softmax")
    assert shown.returncode == 0 and '"tier": "medium"' in shown.stdout and "class Model" in shown.stdout
    missing = run_cli("tasks", "show", "no_such_task")
    assert missing.returncode != 0 and "no_such_task" in (missing.stderr + missing.stdout)
