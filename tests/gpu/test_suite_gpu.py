"""Every reference solution of the built-in suite is judged correct (default and hidden shapes)
and timed on a real GPU. This is what ``cudarl tasks check`` runs; builds go 16 at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Outcome

pytestmark = pytest.mark.gpu

TASKS = {t.id: t for t in load_suite()}
SOLUTIONS = suite_solutions()


@pytest.fixture(scope="module")
def built_suite(gpu_tester, request) -> None:
    """Build the selected solutions (``-k`` picks a share of the suite) 16 at a time."""
    selected = [item.callspec.params["solution"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda s: gpu_tester.build(TASKS[s.task_id], s), selected))


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[s.task_id for s in SOLUTIONS])
def test_suite_solution_passes(gpu_tester, built_suite, solution):
    verdict = gpu_tester.evaluate(TASKS[solution.task_id], solution)
    assert verdict.outcome == Outcome.PASSED, verdict.reasons
    assert verdict.correctness.hidden_trials_passed == 2
