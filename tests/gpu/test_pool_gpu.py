"""The tester pool on the GPU machine: 1 bench worker (pinned to the GPU) and 14 compile workers
judge the built-in suite's honest solutions through Ray; a candidate that poisons its CUDA
context (illegal address) sits in the middle of the batch and must change no other verdict."""

from __future__ import annotations

import time

import pytest

from cudarl.config import CudarlConfig
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Candidate, Outcome
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_pool_judges_the_suite_and_a_poisoned_context_changes_nothing():
    import ray  # a dependency: a broken install must fail, not skip

    from cudarl.pool import start_pool

    tasks = {t.id: t for t in load_suite()}
    solutions = suite_solutions()
    poison = Candidate(task_id="vector_add", id="vector_add/illegal_access",
                       source=(FIXTURES / "candidates" / "vector_add" / "illegal_access.py").read_text())
    candidates = solutions[: len(solutions) // 2] + [poison] + solutions[len(solutions) // 2:]
    config = CudarlConfig.model_validate({"pool": {"name": "gpu-suite", "min_compile_workers": 14,
                                                   "max_compile_workers": 14, "min_bench_workers": 1,
                                                   "max_bench_workers": 1}})
    ray.init(num_cpus=16, num_gpus=1, include_dashboard=False, logging_level="WARNING")
    try:
        pool = start_pool(config)
        started = time.monotonic()
        verdicts = pool.judge([(tasks[c.task_id], c) for c in candidates], timeout_s=1500,
                              progress=lambda v: print(f"{time.monotonic() - started:7.1f} s  {v.candidate_id:40s} "
                                                       f"{v.outcome.value:14s} {v.reasons[:1]}", flush=True))
        stats = pool.stats()
        print(stats)
    finally:
        ray.shutdown()
    by_id = {v.candidate_id: v for v in verdicts}
    assert len(by_id) == len(candidates)
    assert by_id[poison.id].outcome in (Outcome.CUDA_ERROR, Outcome.CRASHED), by_id[poison.id].reasons
    failed = {c.id: by_id[c.id].reasons for c in solutions if by_id[c.id].outcome != Outcome.PASSED}
    assert not failed
    assert all(by_id[c.id].correctness.hidden_trials_passed == 2 for c in solutions)
    assert stats["compile_profile"]["mode"] == "extension"
    assert stats["restarts"] == {}  # the GPU stayed healthy: the bench worker was never replaced
    assert stats["verdicts"]["passed"] == len(solutions)
