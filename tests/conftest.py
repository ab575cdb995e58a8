"""Shared fixtures. The compile cache lives in one temporary folder per test session, so a
candidate built by one test is a cache hit for the next (as in production)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudarl.config import CudarlConfig, TesterConfig

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


def make_tester_config(**sections: dict) -> TesterConfig:
    """A TesterConfig with some sections' fields replaced, e.g. sandbox={"timeout_s": 10}."""
    base = CudarlConfig().tester
    updates = {name: getattr(base, name).model_copy(update=fields) for name, fields in sections.items()}
    return base.model_copy(update=updates)
