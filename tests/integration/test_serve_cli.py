"""``cudarl serve`` and ``serve run`` start the service: each in its own process on its own local
Ray, with a tiny model, answering ``/healthz`` and a request over HTTP; then stopped as a supervisor
stops it (``cudarl serve``: SIGTERM) and as a user does (``serve run``: Ctrl-C), each exiting by
itself with code 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.processes import sigint_as_in_a_terminal, stop_group
from tests.fixtures.ray_session import free_port as _free_port
from tests.integration.test_serve import _call

ROOT = Path(__file__).resolve().parents[2]


def _output(process: subprocess.Popen) -> str:
    return process.log.read_text(errors="replace")[-3000:]


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}: {_output(process)}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(2)
    raise AssertionError(f"no /healthz answer within {timeout_s} s")


def _start(command: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    """A server in a session of its own (so that a failed test can stop it with its local Ray), with
    SIGINT at its default as a terminal starts it; its output in ``log`` (a pipe nobody reads could
    fill and stall it). ``RAY_ADDRESS=local``: ``serve run`` starts a Ray of its own, never joining
    one that another suite on this machine started with ``ray start``."""
    with log.open("w") as output:
        process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True, preexec_fn=sigint_as_in_a_terminal,
                                   env={**os.environ, "RAY_ADDRESS": "local"})
    process.log = log
    return process


def _stop(process: subprocess.Popen, how: int) -> str:
    """Send ``how`` to the server alone; it must exit by itself with code 0 (its output is returned)."""
    process.send_signal(how)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the server did not stop within 120 s: {_output(process)}") from None
    assert process.returncode == 0, (process.returncode, _output(process))
    return _output(process)


@pytest.mark.slow
def test_cudarl_serve_and_serve_run_answer_over_http(tmp_path, policy_folder, own_ray):
    model = policy_folder  # own_ray: the shared cluster stops, so these processes' own clusters have the CPUs
    config = tmp_path / "serve.toml"
    config.write_text(f'[tester.compile]\nmode = "kernel"\n[pool]\nmin_compile_workers = 1\nmax_compile_workers = 1\n'
                      f'[serve]\nmodel = "{model}"\nengine = "hf"\nmax_new_tokens = 400\ntemperature = 0.1\n')
    port = _free_port()
    process = _start([sys.executable, "-m", "cudarl.cli", "serve", "--config", str(config), "--port", str(port)],
                     tmp_path, tmp_path / "cudarl-serve.log")
    try:
        assert _wait_healthy(f"http://127.0.0.1:{port}", process)["versions"] == ["base"]
        status, answer = _call(f"http://127.0.0.1:{port}/v1/optimize", {"task_id": "vector_add",
                                                                          "budget": {"turns": 1}})
        assert status == 200 and answer["version"] == "base" and answer["turns"][0]["outcome"] == "compiled"
        assert "cudarl serve: stopped" in _stop(process, signal.SIGTERM)
    finally:
        stop_group(process, timeout_s=30)  # a no-op after a clean stop; else the server and its local Ray
    # serve run with a YAML like deploy/serve.yaml, pointing at this config
    port = _free_port()
    spec = (ROOT / "deploy" / "serve.yaml").read_text().replace("port: 8000", f"port: {port}").replace(
        "host: 0.0.0.0", "host: 127.0.0.1").replace("config: deploy/serve.toml", f"config: {config}")
    (tmp_path / "serve.yaml").write_text(spec)
    serve_cli = str(Path(sys.executable).with_name("serve"))
    process = _start([serve_cli, "run", str(tmp_path / "serve.yaml")], ROOT, tmp_path / "serve-run.log")
    try:
        assert _wait_healthy(f"http://127.0.0.1:{port}", process)["versions"] == ["base"]
        _stop(process, signal.SIGINT)
    finally:
        stop_group(process, timeout_s=30)
