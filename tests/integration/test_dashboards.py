"""Every dashboard panel's PromQL returns data from a real Prometheus (Debian's package) scraping
a real local Ray cluster that ran a short workload: the tester pool judging candidates
(compile-only here), one real RL step of a tiny model (``cudarl train``'s driver), and the
service answering requests over HTTP. GPU panels (NVML samples of bench workers) are checked only
where a GPU is; the test skips, saying why, where Prometheus is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.fixtures.models import TASK
from tests.fixtures.ray_session import free_port as _free_port
from tests.integration.test_serve import _call


def _query(base: str, expr: str, since: float) -> list:
    """The expression over the test's time range, as a dashboard asks for it (a gauge set once
    has samples there even after Ray stops exporting it)."""
    url = f"{base}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": since, "end": time.time(), "step": "1s"})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="Prometheus is not installed (Debian: apt-get install prometheus; .ci/run installs it)")
def test_every_panel_returns_data(tmp_path, policy_folder, own_ray):
    """A Ray of its own (``own_ray``): metrics left by earlier tests on the shared cluster could
    give a panel data that this workload did not make."""
    import ray
    import torch
    from ray import serve

    from cudarl.config import CudarlConfig
    from cudarl.dashboards import DASHBOARDS
    from cudarl.pool import start_pool
    from cudarl.rl.driver import run_training
    from cudarl.serve.app import app_from_config

    model = policy_folder
    metrics_port, prometheus_port, http_port = _free_port(), _free_port(), _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: ray, static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]}}]\n")
    prometheus = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                   f"--web.listen-address=127.0.0.1:{prometheus_port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base, since = f"http://127.0.0.1:{prometheus_port}", time.time()
    config = CudarlConfig.model_validate({
        "tester": {"compile": {"mode": "kernel"}},
        "pool": {"min_compile_workers": 1, "max_compile_workers": 1},
        "train": {"model": str(model), "engine": "hf", "steps": 1, "tasks_per_step": 1, "group_size": 2,
                  "optimizer_turns": 0, "max_new_tokens": 400, "temperature": 0.1, "lora_rank": 4, "lora_alpha": 8},
        "serve": {"model": str(model), "engine": "hf", "max_new_tokens": 400, "temperature": 0.1},
        "curriculum": {"tiers": ["easy"]}})
    try:
        ray.init(address="local", num_cpus=6, include_dashboard=False, namespace="cudarl", logging_level="WARNING",
                 _metrics_export_port=metrics_port)
        pool = start_pool(config)
        run_training(config, tmp_path / "dashboards-run", [TASK], pool.judge)  # judges too: the tester's metrics
        serve.start(http_options={"host": "127.0.0.1", "port": http_port})
        serve.run(app_from_config(config), name="cudarl", route_prefix="/")
        url = f"http://127.0.0.1:{http_port}/v1/optimize"
        assert _call(url, {"task_id": TASK.id, "budget": {"turns": 1}})[0] == 200
        assert _call(url, {"reference": "class Model: pass\n"})[0] == 400
        assert _call(url, {"task_id": TASK.id, "budget": {"seconds": 1e-6}})[0] == 408
        gpu = torch.cuda.is_available()
        panels = [(name, panel) for name, (_, items) in DASHBOARDS.items() for panel in items
                  if not panel.needs or (panel.needs == "gpu" and gpu)]
        empty: list[str] = []
        deadline = time.monotonic() + 120  # Ray's agent exports every few seconds; Prometheus scrapes each second
        while time.monotonic() < deadline:
            empty = [f"{name}: {panel.title}: {panel.expr}" for name, panel in panels
                     if not _query(base, panel.expr, since)]
            if not empty:
                break
            time.sleep(3)
        assert not empty, "panels without data:\n" + "\n".join(empty)
    finally:
        serve.shutdown()
        prometheus.terminate()
        prometheus.wait(30)
