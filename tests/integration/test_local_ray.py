"""A local Ray that cudarl starts under ``uv run`` (as ``scripts/demo.sh`` and ``scripts/test.sh``
run it) starts its workers on the driver's own Python: Ray's uv hook would otherwise ship the
project as the job's working_dir and start every worker through ``uv run`` there, which built a
fresh 6 GB copy of the environment in every Ray session (``cudarl._compat``). A user's own
``RAY_ENABLE_UV_RUN_RUNTIME_ENV=1`` keeps Ray's behaviour (and shows the check can fail)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudarl import env

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json
import ray
from cudarl.pool.client import connect_ray
connect_ray(num_cpus=1)
print("RUNTIME_ENV=" + json.dumps(ray.get_runtime_context().runtime_env))
ray.shutdown()
"""


def _job_runtime_env(switch: str | None) -> dict:
    uv = [shutil.which("uv")] if shutil.which("uv") else [sys.executable, "-m", "uv"]
    environment = {k: v for k, v in os.environ.items() if k != env.RAY_ENABLE_UV_RUN_RUNTIME_ENV}
    if switch is not None:
        environment[env.RAY_ENABLE_UV_RUN_RUNTIME_ENV] = switch
    run = subprocess.run([*uv, "run", "--locked", "--extra", "verl", "--extra", "docker", "python", "-c", PROBE],
                         cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("RUNTIME_ENV=")]
    return json.loads(line.removeprefix("RUNTIME_ENV="))


@pytest.mark.slow
def test_cudarls_local_ray_under_uv_run_keeps_its_workers_on_this_python(own_ray):
    assert _job_runtime_env(None) == {}
    kept = _job_runtime_env("1")  # the user's choice: Ray's own uv propagation
    assert "uv run" in kept["py_executable"] and kept["working_dir"].startswith("gcs://")
