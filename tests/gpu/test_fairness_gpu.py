"""The fairness corpus on a real GPU: every honest kernel ``passed``, every hack its verdict and
reason, with every defense on (``tests/fairness``; the guard half runs on the CPU in
``tests/unit/test_fairness_corpus.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudarl import env
from cudarl.tasks.builtin import load_suite
from cudarl.tester import Tester
from tests.conftest import make_tester_config
from tests.fixtures.exploits import FAIRNESS, load_exploits

pytestmark = pytest.mark.gpu

TASKS = {t.id: t for t in load_suite()}


@pytest.fixture(scope="module")
def tester(tmp_path_factory) -> Tester:
    root = Path(env.get(env.CUDARL_CACHE_DIR) or tmp_path_factory.mktemp("gpu-cache"))
    return Tester(make_tester_config(compile={"mode": "extension"}), cache_root=root)


@pytest.mark.parametrize("entry", load_exploits(FAIRNESS), ids=lambda e: e.id)
def test_fairness_entry_gets_its_verdict(tester, entry):
    verdict = tester.evaluate(TASKS[entry.task_id], entry.candidate())
    assert verdict.outcome.value == entry.expect, (verdict.outcome, verdict.reasons)
    assert entry.reason in " ".join(verdict.reasons), verdict.reasons
