"""The tester on a real GPU: honest kernels pass with a speedup, wrong ones fail for the right
reason, crashing and hanging kernels get their verdict without harming the next candidate, and
timings repeat."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cudarl.tester import Outcome, Tester
from tests.gpu.conftest import HONEST, source_of

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("task_id", HONEST)
def test_honest_kernel_passes_with_a_speedup(gpu_tester, tasks, prebuilt, task_id):
    verdict = gpu_tester.evaluate(tasks[task_id], source_of(task_id, "honest"))
    assert verdict.outcome == Outcome.PASSED, verdict.reasons
    assert verdict.correctness.trials_run == verdict.correctness.trials_passed >= 5
    timing = verdict.timing
    assert timing.speedup == pytest.approx(timing.reference.median_ms / timing.candidate.median_ms)
    assert timing.speedup > 0.2, "an honest kernel of the suite runs at least a fifth as fast as torch"
    assert timing.candidate.count >= 20
    assert verdict.timing.l2_flush_bytes >= 2 * 40 * 1024 * 1024
    assert verdict.compile.kernels and verdict.sandbox.network_isolated
    print(f"{task_id}: {verdict.timing.candidate.median_ms:.4f} ms vs {verdict.timing.reference.median_ms:.4f} ms "
          f"= {verdict.timing.speedup:.2f}x, max abs err {verdict.correctness.max_abs_error:.2e}")


WRONG = [
    ("vector_add", "off_by_one", "1 NaN value(s)"),  # the runner fills fresh memory with NaN
    ("vector_add", "partial_write", "NaN value(s)"),
    ("row_sum", "race", "elements outside atol"),
    ("relu", "wrong_dtype", "dtype"),
    ("softmax", "wrong_shape", "shape"),
    ("relu", "nan", "NaN"),
]


@pytest.mark.parametrize("task_id,name,reason", WRONG)
def test_wrong_kernel_is_incorrect(gpu_tester, tasks, prebuilt, task_id, name, reason):
    verdict = gpu_tester.evaluate(tasks[task_id], source_of(task_id, name))
    print(f"verdict: {task_id}/{name} {verdict.outcome.value} {verdict.reasons}")
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


def test_reference_timing_is_reused_within_a_tester_and_can_be_turned_off(gpu_tester, tasks, prebuilt, tmp_path):
    before = gpu_tester.references.measured
    first = gpu_tester.evaluate(tasks["relu"], source_of("relu", "honest"))
    second = gpu_tester.evaluate(tasks["relu"], source_of("relu", "honest"))
    assert first.outcome == second.outcome == Outcome.PASSED, (first.reasons, second.reasons)
    assert gpu_tester.references.measured - before <= 1  # one measurement (none if an earlier test made it)
    assert second.timing.reference == first.timing.reference
    assert second.timing.reference_age_s > first.timing.reference_age_s
    assert "timing (reference)" not in second.stage_seconds  # candidate judges never time the reference
    fresh = Tester(gpu_tester.config.model_copy(update={"timing": gpu_tester.config.timing.model_copy(
        update={"reference_reuse_s": 0.0})}), cache_root=gpu_tester.cache.root.parent)
    again = [fresh.evaluate(tasks["relu"], source_of("relu", "honest")) for _ in range(2)]
    assert all(v.outcome == Outcome.PASSED for v in again), [v.reasons for v in again]
    assert fresh.references.measured == 2 and again[0].timing.reference != again[1].timing.reference


def test_a_groups_judges_at_once_share_one_reference_timing(gpu_tester, tasks, prebuilt):
    """Four candidates of one task judged side by side (a GRPO group in a bench worker's slots):
    one reference measurement, the same reference figures in every verdict, speedups from it."""
    tester = Tester(gpu_tester.config, cache_root=gpu_tester.cache.root.parent)
    candidates = [source_of("softmax", "honest") for _ in range(4)]
    builds = [tester.build(tasks["softmax"], c) for c in candidates]
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(lambda c, b: tester.judge(tasks["softmax"], c, b), candidates, builds))
    assert all(v.outcome == Outcome.PASSED for v in verdicts), [v.reasons for v in verdicts]
    assert tester.references.measured == 1
    assert len({v.timing.reference.median_ms for v in verdicts}) == 1
    for verdict in verdicts:
        timing = verdict.timing
        assert timing.speedup == pytest.approx(timing.reference.median_ms / timing.candidate.median_ms)
        print("softmax group", {k: round(v, 2) for k, v in verdict.stage_seconds.items()})


@pytest.mark.parametrize("turns", ["timing", "whole"])
def test_candidates_judged_at_once_on_one_gpu_take_turns(gpu_tester, tasks, prebuilt, turns):
    """Three judges at once on one GPU (as a bench worker's slots run them): all pass, and the
    waits for the GPU show in their stage times."""
    tester = Tester(gpu_tester.config.model_copy(update={"timing": gpu_tester.config.timing.model_copy(
        update={"gpu_turns": turns, "reference_reuse_s": 0.0})}), cache_root=gpu_tester.cache.root.parent)
    ids = ["vector_add", "softmax", "matmul"]
    candidates = [source_of(t, "honest") for t in ids]
    builds = [tester.build(tasks[c.task_id], c) for c in candidates]
    with ThreadPoolExecutor(max_workers=3) as pool:
        verdicts = list(pool.map(lambda c, b: tester.judge(tasks[c.task_id], c, b), candidates, builds))
    for task_id, verdict in zip(ids, verdicts):
        assert verdict.outcome == Outcome.PASSED, (task_id, verdict.reasons)
        print(task_id, turns, {k: round(v, 2) for k, v in verdict.stage_seconds.items()})
    waits = [sum(s for k, s in v.stage_seconds.items() if "(gpu turn)" in k) for v in verdicts]
    assert max(waits) > 0.5, f"no judge waited for its turn: {waits}"
