"""The fairness corpus on a real GPU: every honest kernel ``passed``, every hack its verdict and
reason, with every defense on and, for entries with ``expect-unguarded``, with the static rules
off (the runtime defenses alone). Files an entry tries to make outside its folder
(``must-not-create``) must not exist afterwards. Entries with a ``not-yet`` line are strict
xfails (``tests/fixtures/exploits.py``). The guard half runs on the CPU in
``tests/unit/test_fairness_corpus.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudarl import env
from cudarl.tasks.builtin import load_suite
from cudarl.tester import Tester
from tests.conftest import make_tester_config
from tests.fixtures.exploits import FAIRNESS, Exploit, load_exploits

pytestmark = pytest.mark.gpu

TASKS = {t.id: t for t in load_suite()}
CORPUS = load_exploits(FAIRNESS)


def _tester(root: Path, static_rules: bool) -> Tester:
    """A tester with its own cache folder (the compile cache's key also tells builds made with
    the static rules from builds made without them; separate folders keep the runs apart)."""
    config = make_tester_config(compile={"mode": "extension"}, timing={"budget_s": 1.0, "warmup_s": 0.3},
                                hardening={"static_rules": static_rules})
    return Tester(config, cache_root=root / ("guarded" if static_rules else "unguarded"))


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    return Path(env.get(env.CUDARL_CACHE_DIR) or tmp_path_factory.mktemp("gpu-cache"))


@pytest.fixture(scope="module")
def guarded(cache_root) -> Tester:
    return _tester(cache_root, static_rules=True)


@pytest.fixture(scope="module")
def unguarded(cache_root) -> Tester:
    """Static rules off (the runtime defenses alone)."""
    return _tester(cache_root, static_rules=False)


def _param(entry: Exploit, gap: str):
    return pytest.param(entry, id=entry.id, marks=[pytest.mark.xfail(strict=True, reason=gap)] if gap else [])


def _judge(tester: Tester, entry: Exploit, outcome: str, reason: str) -> None:
    target = Path(entry.must_not_create) if entry.must_not_create else None
    if target is not None:
        target.unlink(missing_ok=True)  # left by an earlier run
    verdict = tester.evaluate(TASKS[entry.task_id], entry.candidate())
    print(f"verdict: {entry.id} {verdict.outcome.value} {verdict.reasons}")
    created = target is not None and target.exists()
    if target is not None:
        target.unlink(missing_ok=True)
    assert not created, f"the candidate created {target}"
    assert verdict.outcome.value == outcome, (verdict.outcome, verdict.reasons)
    assert reason in " ".join(verdict.reasons), verdict.reasons


@pytest.mark.parametrize("entry", [_param(e, e.not_yet or e.not_yet_verdict) for e in CORPUS])
def test_fairness_entry_gets_its_verdict(guarded, entry):
    _judge(guarded, entry, entry.expect, entry.reason)


@pytest.mark.parametrize("entry", [_param(e, e.not_yet_unguarded) for e in CORPUS if e.expect_unguarded])
def test_fairness_entry_gets_its_verdict_with_the_static_rules_off(unguarded, entry):
    _judge(unguarded, entry, entry.expect_unguarded, entry.reason_unguarded)
