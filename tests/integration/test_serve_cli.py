"""``cudarl serve`` and ``serve run`` start the service: each in its own process on its own local
Ray, with a tiny model, answering ``/healthz`` and a request over HTTP; then stopped (Ctrl-C)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.ray_session import free_port as _free_port
from tests.integration.test_serve import _call

ROOT = Path(__file__).resolve().parents[2]


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}: {process.stdout.read()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(2)
    raise AssertionError(f"no /healthz answer within {timeout_s} s")


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)


@pytest.mark.slow
def test_cudarl_serve_and_serve_run_answer_over_http(tmp_path, policy_folder, own_ray):
    model = policy_folder  # own_ray: the shared cluster stops, so these processes' own clusters have the CPUs
    config = tmp_path / "serve.toml"
    config.write_text(f'[tester.compile]\nmode = "kernel"\n[pool]\nmin_compile_workers = 1\nmax_compile_workers = 1\n'
                      f'[serve]\nmodel = "{model}"\nengine = "hf"\nmax_new_tokens = 400\ntemperature = 0.1\n')
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "cudarl.cli", "serve", "--config", str(config), "--port",
                                str(port)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_healthy(f"http://127.0.0.1:{port}", process)["versions"] == ["base"]
        status, answer = _call(f"http://127.0.0.1:{port}/v1/optimize", {"task_id": "vector_add",
                                                                          "budget": {"turns": 1}})
        assert status == 200 and answer["version"] == "base" and answer["turns"][0]["outcome"] == "compiled"
    finally:
        _stop(process)
    # serve run with a YAML like deploy/serve.yaml, pointing at this config
    port = _free_port()
    spec = (ROOT / "deploy" / "serve.yaml").read_text().replace("port: 8000", f"port: {port}").replace(
        "host: 0.0.0.0", "host: 127.0.0.1").replace("config: deploy/serve.toml", f"config: {config}")
    (tmp_path / "serve.yaml").write_text(spec)
    serve_cli = str(Path(sys.executable).with_name("serve"))
    process = subprocess.Popen([serve_cli, "run", str(tmp_path / "serve.yaml")], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_healthy(f"http://127.0.0.1:{port}", process)["versions"] == ["base"]
    finally:
        _stop(process)
