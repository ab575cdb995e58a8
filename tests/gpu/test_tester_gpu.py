"""The tester on a real GPU: honest kernels pass with a speedup, wrong ones fail for the right
reason, crashing and hanging kernels get their verdict without harming the next candidate, and
timings repeat."""

from __future__ import annotations

import pytest

from cudarl.tester import Outcome
from tests.gpu.conftest import HONEST, source_of

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("task_id", HONEST)
def test_honest_kernel_passes_with_a_speedup(gpu_tester, tasks, prebuilt, task_id):
    verdict = gpu_tester.evaluate(tasks[task_id], source_of(task_id, "honest"))
    assert verdict.outcome == Outcome.PASSED, verdict.reasons
    assert verdict.correctness.trials_run == verdict.correctness.trials_passed >= 5
    assert verdict.timing.speedup > 0 and verdict.timing.candidate.count >= 20
    assert verdict.timing.l2_flush_bytes >= 2 * 40 * 1024 * 1024
    assert verdict.compile.kernels and verdict.sandbox.network_isolated
    print(f"{task_id}: {verdict.timing.candidate.median_ms:.4f} ms vs {verdict.timing.reference.median_ms:.4f} ms "
          f"= {verdict.timing.speedup:.2f}x, max abs err {verdict.correctness.max_abs_error:.2e}")


WRONG = [
    ("vector_add", "off_by_one", ""),
    ("vector_add", "partial_write", ""),
    ("row_sum", "race", ""),
    ("relu", "wrong_dtype", "dtype"),
    ("softmax", "wrong_shape", "shape"),
    ("relu", "nan", "NaN"),
]


@pytest.mark.parametrize("task_id,name,reason", WRONG)
def test_wrong_kernel_is_incorrect(gpu_tester, tasks, prebuilt, task_id, name, reason):
    verdict = gpu_tester.evaluate(tasks[task_id], source_of(task_id, name))
    assert verdict.outcome == Outcome.INCORRECT, (verdict.outcome, verdict.reasons)
    assert verdict.correctness.first_failure is not None
    assert reason in verdict.reasons[0]


@pytest.mark.parametrize("name,outcome", [("illegal_access", Outcome.CUDA_ERROR), ("infinite_loop", Outcome.TIMEOUT)])
def test_fatal_kernel_gets_its_verdict_and_the_next_candidate_is_judged(gpu_tester, tasks, prebuilt, name, outcome):
    verdict = gpu_tester.evaluate(tasks["vector_add"], source_of("vector_add", name))
    assert verdict.outcome == outcome, verdict.reasons
    assert verdict.stage.value == "correctness"
    after = gpu_tester.evaluate(tasks["vector_add"], source_of("vector_add", "honest"))
    assert after.outcome == Outcome.PASSED, after.reasons


def test_repeated_timing_of_one_candidate_agrees_within_3_percent(gpu_tester, tasks, prebuilt):
    medians = []
    for _ in range(5):
        verdict = gpu_tester.evaluate(tasks["vector_add"], source_of("vector_add", "honest"))
        assert verdict.outcome == Outcome.PASSED, verdict.reasons
        medians.append(verdict.timing.candidate.median_ms)
    assert min(medians) >= 0.05, f"kernel too short for this check: {medians}"
    spread = (max(medians) - min(medians)) / min(medians)
    print(f"vector_add medians (ms): {medians}; spread {spread:.2%}")
    assert spread < 0.03, medians
