"""Every kernel choice (``cudarl.rl.kernel_choices``) through the real tester on this machine:
guard and NVRTC compile for every choice of every task (a few seconds: NVRTC needs no torch
headers), with the compiler's resource report for each kernel. The whole compile-only evaluation
of every choice (each loaded in the sandbox) is part of the compile-only kernel-learning test
(``tests/integration/test_kernel_learning.py``), whose loop then reuses those verdicts. One build
cache for the module, as in production."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cudarl.rl.kernel_choices import TASKS, render_all
from cudarl.tasks.builtin import load_suite
from cudarl.tester import Tester


@pytest.fixture(scope="module")
def tester(cache_root) -> Tester:
    return Tester(cache_root=cache_root)


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_suite() if t.id in TASKS}


def test_every_choice_compiles(tester, tasks):
    candidates = render_all()
    with ThreadPoolExecutor(max_workers=4) as pool:
        built = list(pool.map(lambda c: tester.build(tasks[c.task_id], c), candidates))
    for candidate, item in zip(candidates, built):
        assert item.ready, (candidate.id, item.verdict.outcome, item.verdict.reasons)
        report = item.verdict.compile
        assert report is not None and report.mode == "nvrtc", candidate.id
        names = {k.name for k in report.kernels}
        assert names >= {candidate.task_id}, (candidate.id, names)  # each template's kernel is named for its task
        assert all(k.spill_store_bytes == 0 for k in report.kernels), (candidate.id, report.kernels)
    # a second build of the same sources is a cache hit
    again = tester.build(tasks[candidates[0].task_id], candidates[0])
    assert again.ready and again.verdict.compile.cached
