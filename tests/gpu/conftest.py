"""GPU tests run on a machine with CUDA; elsewhere every one of them is skipped with the reason."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudarl import env
from cudarl.tasks import load_tasks
from cudarl.tester import Candidate, Tester
from tests.conftest import FIXTURES, SOLUTIONS, SUITE, make_tester_config


def _cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine (gpu tests run on the GPU machine)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _cuda_reason()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


HONEST = ["vector_add", "relu", "row_sum", "softmax", "layer_norm", "matmul"]
HOSTILE = sorted(p.relative_to(FIXTURES / "candidates") for p in (FIXTURES / "candidates").glob("*/*.py"))


def source_of(task_id: str, name: str) -> Candidate:
    path = SOLUTIONS / f"{task_id}.py" if name == "honest" else FIXTURES / "candidates" / task_id / f"{name}.py"
    return Candidate(task_id=task_id, id=f"{task_id}/{name}", source=path.read_text())


@pytest.fixture(scope="session")
def gpu_tester(tmp_path_factory) -> Tester:
    root = Path(env.get(env.CUDARL_CACHE_DIR) or tmp_path_factory.mktemp("gpu-cache"))
    config = make_tester_config(compile={"mode": "extension", "jobs": 4},
                                sandbox={"timeout_s": 60.0},
                                timing={"budget_s": 3.0})
    return Tester(config, cache_root=root)


@pytest.fixture(scope="session")
def tasks():
    return {t.id: t for t in load_tasks(SUITE)}


@pytest.fixture(scope="session")
def prebuilt(gpu_tester, tasks) -> None:
    """Build every candidate once, several at a time (builds dominate the suite's time)."""
    candidates = [source_of(t, "honest") for t in HONEST]
    candidates += [source_of(p.parent.name, p.stem) for p in HOSTILE]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda c: gpu_tester.build(tasks[c.task_id], c), candidates))
