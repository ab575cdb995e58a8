"""The service on a GPU: one ``/v1/optimize`` over real HTTP with full verdicts (the tiny model
memorized an honest kernel for the task; the pool's bench worker runs it), the best verified
kernel returned with its speedup and correctness evidence, and the bench worker's GPU samples
through nvidia-ml-py (``cudarl.nvml``) sane on a real driver. The CPU version of the service's
test is ``tests/integration/test_serve.py``."""

from __future__ import annotations

import pytest

from tests.fixtures.models import TASK
from tests.fixtures.ray_session import free_port as _free_port
from tests.integration.test_serve import _call

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_nvml_samples_are_sane_on_a_real_driver():
    from cudarl import nvml

    samples = nvml.sample()
    assert samples and len({s.uuid for s in samples}) == len(samples)
    for s in samples:
        assert 0 <= s.utilization_percent <= 100 and 0 < s.memory_used_bytes <= s.memory_total_bytes


def test_one_request_with_full_verdicts_over_http(policy_folder, own_ray):
    import ray
    from ray import serve

    from cudarl.config import CudarlConfig
    from cudarl.serve.app import app_from_config

    model = policy_folder
    config = CudarlConfig.model_validate({
        "pool": {"min_compile_workers": 1, "max_compile_workers": 2, "min_bench_workers": 1, "max_bench_workers": 1,
                 "gpus_per_bench_worker": 0.25},
        "serve": {"model": str(model), "engine": "hf", "versions": {"v1": ""}, "agent_replicas": 1,
                  "max_new_tokens": 400, "temperature": 0.1, "gpus_per_agent": 0.25}})
    port = _free_port()
    try:
        ray.init(address="local", num_cpus=8, num_gpus=1, include_dashboard=False, namespace="cudarl",
                 logging_level="WARNING")
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(app_from_config(config), name="cudarl", route_prefix="/")
        status, answer = _call(f"http://127.0.0.1:{port}/v1/optimize",
                               {"task_id": TASK.id, "budget": {"turns": 1, "seconds": 300}})
    finally:
        serve.shutdown()
        ray.shutdown()
    assert status == 200, answer
    assert answer["turns"][0]["outcome"] == "passed", answer["turns"]
    assert answer["kernel"] and answer["verdict"]["outcome"] == "passed" and answer["verdict"]["speedup"] > 0
