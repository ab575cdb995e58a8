"""Shared fixtures (tests/README.md says what each costs). The compile cache lives in one
temporary folder per test session, so a candidate built by one test is a cache hit for the next
(as in production); one local Ray serves every integration test that does not need its own."""

from __future__ import annotations

import os

# Before anything imports Ray: the suite runs under `uv run` (scripts/test.sh), and Ray would
# otherwise start the workers of every cluster a test starts, `ray start` heads and the cudarl
# commands' clusters included, through `uv run` in a fresh copy of the environment
# (cudarl._compat.local_ray_workers_on_this_python covers the clusters cudarl itself starts).
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from cudarl.config import CudarlConfig, TesterConfig  # noqa: E402
from tests.fixtures.ray_session import SharedRay, free_port  # noqa: E402

pytest_plugins = ["tests.fixtures.leftovers"]  # what the session left running, named and stopped

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "cudarl" / "tasks" / "suite"
SOLUTIONS = SUITE / "solutions"
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cudarl-cache")


def run_cli(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    """The ``cudarl`` command in a real subprocess (optionally with its own compile cache)."""
    environment = {**os.environ, "CUDARL_CACHE_DIR": str(cache)} if cache else None
    return subprocess.run([sys.executable, "-m", "cudarl.cli", *args], capture_output=True, text=True,
                          timeout=600, env=environment)


def kept_folder(request, tmp_path_factory, name: str) -> Path:
    """A folder in pytest's cache (kept across sessions), or a temporary one when the cache is off
    (``-p no:cacheprovider``)."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir(name)) if cache is not None else tmp_path_factory.mktemp(name)


_SESSION_PCH: dict[str, Path] = {}  # "dir": set once per session by the fixture below


@pytest.fixture(scope="session", autouse=True)
def session_pch_dir(request, tmp_path_factory) -> Path:
    """One folder for the precompiled header of every tester the tests make: it takes a minute to
    build on 2 cores and is the same for all of them (its own subfolder is named by torch, Python
    and flags, so it is kept across sessions in pytest's cache)."""
    folder = kept_folder(request, tmp_path_factory, "cudarl-pch")
    _SESSION_PCH["dir"] = folder
    return folder


def make_tester_config(**sections: dict) -> TesterConfig:
    """A TesterConfig with some sections' fields replaced, e.g. sandbox={"timeout_s": 10}; its
    precompiled header in the session's folder unless ``compile`` names another."""
    base = CudarlConfig().tester
    if "dir" in _SESSION_PCH:
        base = base.with_changes({"compile.pch_dir": str(_SESSION_PCH["dir"])})
    updates = {name: getattr(base, name).model_copy(update=fields) for name, fields in sections.items()}
    return base.model_copy(update=updates)


@pytest.fixture(scope="session")
def ray_cluster():
    """The session's local Ray (``tests.fixtures.ray_session``); ``ensure()`` starts it."""
    shared = SharedRay(metrics_port=free_port())
    yield shared
    shared.release()


@pytest.fixture
def shared_ray(ray_cluster):
    """The session's local Ray, running, for one test; cleared after it."""
    ray_cluster.ensure()
    yield ray_cluster
    ray_cluster.clear()


@pytest.fixture
def own_ray(ray_cluster):
    """For a test that starts a Ray of its own (exact resources, several nodes): the shared one
    is shut down first; whatever the test started is shut down after it."""
    ray_cluster.release()
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def policy_folder(request, tmp_path_factory) -> Path:
    """The memorized vector_add policy (``tests.fixtures.models``), trained once and kept in
    pytest's cache by content. Shared: copy it before changing anything in it."""
    from tests.fixtures.models import vector_add_policy

    return vector_add_policy(kept_folder(request, tmp_path_factory, "cudarl-models"))
