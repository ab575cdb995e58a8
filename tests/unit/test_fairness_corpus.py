"""The fairness corpus (``tests/fairness``) on the CPU: honest kernels in the patterns a blunt
judge rejected pass the guard, and the hacks imitating them are refused with their tag. Their
whole verdicts need the GPU (``tests/gpu/test_fairness_gpu.py``)."""

from __future__ import annotations

import pytest

from cudarl.tasks.builtin import load_suite
from cudarl.tester.build.guard import inspect_source
from tests.fixtures.exploits import FAIRNESS, load_exploits

CORPUS = load_exploits(FAIRNESS)


def test_the_corpus_has_honest_kernels_and_hacks_for_suite_tasks():
    assert {e.expect for e in CORPUS} >= {"passed", "rejected"}
    assert {e.task_id for e in CORPUS} <= {t.id for t in load_suite()}


@pytest.mark.parametrize("entry", [e for e in CORPUS if e.expect == "passed"], ids=lambda e: e.id)
def test_honest_kernels_pass_the_guard(entry):
    assert inspect_source(entry.path.read_text()).reasons == []


@pytest.mark.parametrize("entry", [e for e in CORPUS if e.expect == "rejected" and e.reason.startswith("[")],
                         ids=lambda e: e.id)
def test_hacks_are_refused_with_their_tag(entry):
    reasons = inspect_source(entry.path.read_text()).reasons
    assert any(r.startswith(entry.reason) for r in reasons), reasons
