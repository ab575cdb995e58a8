"""The service over real HTTP on localhost: a tiny model trained here to answer the task with an
honest nvrtc kernel, two agent versions (the base weights, and adapters from a folder), the real
tester pool on a local Ray (compile-only verdicts: no GPU), Ray Serve's HTTP proxy. Valid,
invalid, oversized and concurrent requests; the A/B split's proportions over a few hundred
requests and its stickiness; weights changed while serving; a rollback."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fixtures.models import TASK
from tests.fixtures.ray_session import free_port as _free_port


def _call(url: str, body: dict | None = None, method: str = "POST") -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method if body is not None else "GET",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _model_and_adapters(tmp_path, policy_folder):
    """The tiny model's folder (the session's memorized policy), and a folder with generator/ and
    optimizer/ adapters of rank 4 (B = 0: the same answers as the base, through the adapter path)."""
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    from cudarl.rollout.adapters import save_adapter_folder
    from cudarl.rollout.engine import LoraSettings

    settings = LoraSettings(rank=4, alpha=8)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(policy_folder),
                                LoraConfig(r=4, lora_alpha=8, target_modules=list(settings.target_modules)))
    for role in ("generator", "optimizer"):
        save_adapter_folder(get_peft_model_state_dict(peft_model), settings, tmp_path / "v2" / role)
    return policy_folder, tmp_path / "v2"


@pytest.mark.slow
def test_the_service_over_http(tmp_path, policy_folder, shared_ray):
    from ray import serve

    from cudarl.config import CudarlConfig
    from cudarl.serve.app import app_from_config
    from cudarl.serve.schemas import MAX_PROGRAM_BYTES

    model, adapters = _model_and_adapters(tmp_path, policy_folder)
    config = CudarlConfig.model_validate({
        "tester": {"compile": {"mode": "kernel"}},
        "pool": {"min_compile_workers": 1, "max_compile_workers": 1},
        "serve": {"model": str(model), "engine": "hf", "versions": {"v1": "", "v2": str(adapters)},
                  "weights": {"v1": 3, "v2": 1}, "agent_replicas": 2, "max_new_tokens": 400, "temperature": 0.1,
                  "rollback_below": 0.5, "rollback_min_requests": 3, "rollback_window": 3}})
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(app_from_config(config), name="cudarl", route_prefix="/")
        status, health = _call(f"{url}/healthz")
        assert status == 200 and health["versions"] == ["v1", "v2"]
        status, openapi = _call(f"{url}/openapi.json")
        assert status == 200 and "/v1/optimize" in openapi["paths"]

        # valid requests: a task id and a program; each turn judged by the pool (compile-only here)
        status, answer = _call(f"{url}/v1/optimize", {"task_id": TASK.id, "budget": {"turns": 2, "seconds": 120},
                                                      "client_key": "alice"})
        assert status == 200, answer
        assert answer["task_id"] == TASK.id and answer["version"] in ("v1", "v2")
        assert [turn["role"] for turn in answer["turns"]] == ["generator", "optimizer"]
        # the generator's turn built (no GPU to verify on); the tiny model memorized only that prompt
        assert answer["turns"][0]["outcome"] == "compiled" and answer["turns"][1]["outcome"] in ("compiled",
                                                                                                  "format_error")
        assert answer["kernel"] is None and answer["verdict"] is None and answer["stopped_by"] == "turns"
        status, answer = _call(f"{url}/v1/optimize", {"reference": TASK.source, "budget": {"turns": 1}})
        # a program the model never saw: its answer need not parse, but the turn ran and was recorded
        assert status == 200 and answer["task_id"] == "request" and len(answer["turns"]) == 1
        assert answer["turns"][0]["outcome"] in ("compiled", "format_error", "compile_error")

        # bad requests: one line each, nothing run
        for body, code, words in [
            ({"reference": "def broken(:\n"}, 400, "reference does not parse"),
            ({"reference": "class Model: pass\n"}, 400, "reference lacks get_inputs, get_init_inputs"),
            ({"task_id": "no_such_task"}, 404, "unknown task_id 'no_such_task'"),
            ({"reference": "x" * (MAX_PROGRAM_BYTES + 1)}, 422, "at most"),
            ({"task_id": TASK.id, "budget": {"turns": 99}}, 422, "less than or equal to 16"),
            ({}, 422, "exactly one of"),
        ]:
            status, answer = _call(f"{url}/v1/optimize", body)
            assert status == code and words in json.dumps(answer), (body, status, answer)

        # concurrent requests share the pool; none lost or answered twice
        bodies = [{"task_id": TASK.id, "budget": {"turns": 1}, "client_key": f"c{i}"} for i in range(6)]
        with ThreadPoolExecutor(6) as threads:
            answers = list(threads.map(lambda body: _call(f"{url}/v1/optimize", body), bodies))
        assert [status for status, _ in answers] == [200] * 6
        assert len({answer["request_id"] for _, answer in answers}) == 6

        # the rollback: every answer so far unverified; the first version to give 3 answers
        # (window 3, threshold 0.5) left the split, the other stays (never the last)
        status, state = _call(f"{url}/v1/ab")
        rolled = [version for version, arm in state.items() if arm["rolled_back"]]
        assert status == 200 and len(rolled) == 1 and state[rolled[0]]["weight"] == 0, state
        kept = ({"v1", "v2"} - set(rolled)).pop()
        status, answer = _call(f"{url}/v1/optimize", {"task_id": TASK.id, "budget": {"turns": 1}, "client_key": "z"})
        assert status == 200 and answer["version"] == kept

        # weights changed while serving: both back, 3:1; the split's proportions over 400 requests
        # whose budget is spent before the first turn (408, answered at once, the version named)
        status, state = _call(f"{url}/v1/ab/weights", {"weights": {"v1": 3, "v2": 1}}, method="PUT")
        assert status == 200 and not any(arm["rolled_back"] for arm in state.values())
        quick = [{"task_id": TASK.id, "budget": {"seconds": 1e-6}, "client_key": f"key-{i}"} for i in range(400)]
        with ThreadPoolExecutor(8) as threads:
            answers = list(threads.map(lambda body: _call(f"{url}/v1/optimize", body), quick))
        assert {status for status, _ in answers} == {408}
        assert "ran out before the first turn" in answers[0][1]["detail"]
        share = sum(answer["version"] == "v2" for _, answer in answers) / len(answers)
        assert 0.17 < share < 0.33, share  # 0.25 expected; binomial sd 0.022
        # stickiness: a key keeps its version
        again = [_call(f"{url}/v1/optimize", quick[i])[1]["version"] for i in range(40)]
        assert again == [answers[i][1]["version"] for i in range(40)]
        status, answer = _call(f"{url}/v1/ab/weights", {"weights": {"v9": 1}}, method="PUT")
        assert status == 400 and "no such version" in answer["detail"]
    finally:
        serve.shutdown()
