"""Inline candidates built by the fast path (the lighter torch header, the precompiled header,
the split nvcc driver) pass on the GPU, were built that way (no fallback to the source as
written, the split driver in the build file), and the runner loads what the compile stage built
without rebuilding it (its hook must reproduce the compile child's sources and flags exactly,
or ninja would build again)."""

from __future__ import annotations

import pytest

from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Outcome, Tester
from cudarl.tester.build.inline_fast import LIGHT_HEADER, UNTRIMMED_MARKER
from tests.conftest import make_tester_config

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def fast_tester(tmp_path_factory) -> Tester:
    return Tester(make_tester_config(compile={"mode": "extension"}), cache_root=tmp_path_factory.mktemp("fast"))


@pytest.mark.parametrize("task_id", ["vector_add", "softmax", "attention", "layernorm_gelu"])
def test_fast_inline_build_passes_and_is_not_rebuilt_by_the_runner(fast_tester, task_id):
    task = {t.id: t for t in load_suite()}[task_id]
    solution = suite_solutions({task_id})[0]
    built = fast_tester.build(task, solution)
    assert built.ready, built.verdict.reasons
    build_root = fast_tester.cache.build_root(built.cache_key)
    logs = list(build_root.rglob(".ninja_log"))
    assert logs
    for log in logs:
        assert (log.parent / LIGHT_HEADER).exists() and not (log.parent / UNTRIMMED_MARKER).exists()
        assert "nvcc_split.py" in (log.parent / "build.ninja").read_text()
    before = {log: log.read_text() for log in logs}
    verdict = fast_tester.judge(task, solution, built)
    assert verdict.outcome == Outcome.PASSED, verdict.reasons
    assert {log: log.read_text() for log in logs} == before, "the runner rebuilt the extension"
    print(f"{task_id}: compile {verdict.stage_seconds['compile']:.1f} s "
          f"(pch {verdict.stage_seconds.get('pch', 0):.1f} s), "
          f"load {verdict.stage_seconds.get('load (candidate)', 0):.2f} s, pch: {fast_tester.pch_status}")
