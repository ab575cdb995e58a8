"""The RL run end to end on a CPU with real parts: a tiny model trained here to answer the task
with an honest nvrtc kernel, saved with its tokenizer and loaded by path, the real episode loop,
a real tester pool on a local Ray (compile-only verdicts: no GPU), rewards, GRPO advantages,
Ray Train update workers, the engine in a policy actor fed weights over a gloo weight channel (and,
in the resumed run, by object reference), verified
syncs, overlapped rollouts (step n+1 during step n's update), a policy actor killed as a step
begins replaced on its last weights, a rollout whose judge timed out tried again, the step log
(JSONL, TensorBoard, Prometheus) and checkpoints. Then the run's folder, left as a kill during its
last checkpoint leaves it (the log through that step, the checkpoint half-written), is resumed:
from the checkpoint before, it runs the two faulted steps again without faults and ends in
exactly the state of the whole run, whose retries therefore changed nothing.

The same cluster then serves a few requests, and every dashboard panel's PromQL must return data
from a real Prometheus (Debian's package) that scraped it all along: the pool's, the run's and the
service's metrics come from this one workload (GPU panels, NVML samples of bench workers, only
where a GPU is; the panel test skips, saying why, where Prometheus is not installed). One run
shows both, where two scenarios used to start a Ray, a pool and a training run each."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from tests.fixtures.models import TASK
from tests.fixtures.ray_session import SharedRay, free_port
from tests.integration.test_serve import _call

PROMETHEUS = shutil.which("prometheus")


def _scrape(port: int, metric: str, **labels: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(metric + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def _query(base: str, expr: str, since: float) -> list:
    """The expression over the run's time range, as a dashboard asks for it (a gauge set once
    has samples there even after Ray stops exporting it)."""
    url = f"{base}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": since, "end": time.time(), "step": "1s"})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@dataclass
class ObservedRun:
    """What the module's one workload left for its tests."""

    run: Path
    stopped: Path
    records: list
    resumed: list
    phases: list[tuple[int, str]]
    exported: dict[str, float | None]
    prometheus: str | None = None  # the base URL, when Prometheus is installed
    since: float = 0.0
    served: list[int] = field(default_factory=list)  # the statuses of the service's answers


def _start_prometheus(folder: Path, metrics_port: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    (folder / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: ray, static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]}}]\n")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={folder / 'prometheus.yml'}",
                                f"--storage.tsdb.path={folder / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def observed_run(ray_cluster, policy_folder, tmp_path_factory):
    """A Ray of this module's own (the session's is released first): metrics left by earlier tests
    on the shared cluster could give a panel data that this workload did not make."""
    import ray
    from ray import serve

    from cudarl.config import CudarlConfig
    from cudarl.pool import start_pool
    from cudarl.rl.driver import run_training
    from cudarl.serve.app import app_from_config

    tmp_path = tmp_path_factory.mktemp("rl-driver")
    ray_cluster.release()
    own = SharedRay(metrics_port=free_port())
    prometheus, base, since = None, None, time.time()
    if PROMETHEUS:
        prometheus, base = _start_prometheus(tmp_path, own.metrics_port)
    config = CudarlConfig.model_validate({
        "tester": {"compile": {"mode": "kernel"}},
        "pool": {"min_compile_workers": 1, "max_compile_workers": 1},
        "train": {"model": str(policy_folder), "engine": "hf", "steps": 4, "tasks_per_step": 1,
                  "group_size": 2, "optimizer_turns": 1, "max_new_tokens": 400, "temperature": 0.1,
                  "lora_rank": 4, "lora_alpha": 8, "learning_rate": 1e-3, "checkpoint_every": 2,
                  "overlap": True, "tensorboard": True},
        "serve": {"model": str(policy_folder), "engine": "hf", "max_new_tokens": 400, "temperature": 0.1},
        "curriculum": {"tiers": ["easy"]}})
    phases: list[tuple[int, str]] = []
    fail_next = {"judge": False}

    def judge(pairs):  # step 3's first judge call times out for real (no wait at all), once
        if fail_next["judge"]:
            fail_next["judge"] = False
            return pool.judge(pairs, timeout_s=0)
        return pool.judge(pairs)

    def on_phase(step: int, phase: str) -> None:
        phases.append((step, phase))
        first = phases.count((step, phase)) == 1
        if (step, phase) == (3, "rollout (overlapping the last update)") and first:
            fail_next["judge"] = True
        if (step, phase) == (2, "rollout") and first:  # the policy actor dies as step 2 begins
            (name,) = [n for n in ray.util.list_named_actors() if n.startswith("cudarl-policy-")]
            ray.kill(ray.get_actor(name), no_restart=True)

    try:
        own.ensure()
        port, run = own.metrics_port, tmp_path / "rl-driver-run"
        pool = start_pool(config)
        # the whole run's weights go over a gloo weight channel (a new one after the policy's
        # restart); the resumed run's through the object store: the same results
        records = run_training(config.with_changes({"train.weight_sync": "collective"}), run, [TASK],
                               judge, on_phase=on_phase)
        deadline = time.monotonic() + 60  # Ray's metrics agent exports every few seconds
        while _scrape(port, "ray_cudarl_train_step", run=run.name) != 4 and time.monotonic() < deadline:
            time.sleep(2)
        exported = {name: _scrape(port, f"ray_cudarl_train_{name}", run=run.name)
                    for name in ("step", "weights_version", "version_lag", "reward")}
        exported["rate"] = _scrape(port, "ray_cudarl_train_rate", run=run.name, kind="compile", tier="easy")
        exported["seconds"] = _scrape(port, "ray_cudarl_train_step_seconds", run=run.name, phase="judge")
        stopped = tmp_path / "stopped"  # the run as a kill while writing its step-4 checkpoint leaves it
        shutil.copytree(run, stopped)
        (stopped / "checkpoints" / "step-4").rename(stopped / "checkpoints" / "step-4.partial")
        (stopped / "checkpoints" / "step-4.partial" / "state.json").unlink()  # written last: the part missing
        resumed = run_training(config, stopped, [TASK], pool.judge, resume=True)
        observed = ObservedRun(run, stopped, records, resumed, phases, exported, base, since)
        if prometheus is not None:  # the service's panels: a few answers of every kind
            http_port = free_port()
            serve.start(http_options={"host": "127.0.0.1", "port": http_port})
            serve.run(app_from_config(config), name="cudarl", route_prefix="/")
            url = f"http://127.0.0.1:{http_port}/v1/optimize"
            observed.served = [_call(url, {"task_id": TASK.id, "budget": {"turns": 1}})[0],
                               _call(url, {"reference": "class Model: pass\n"})[0],
                               _call(url, {"task_id": TASK.id, "budget": {"seconds": 1e-6}})[0]]
        yield observed
    finally:
        if ray.is_initialized():
            serve.shutdown()
        own.release()
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(30)


@pytest.mark.slow
def test_the_full_loop_with_a_real_pool_and_an_exact_resume(observed_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from cudarl.rollout.adapters import read_adapter_folder

    run, stopped, records, resumed = observed_run.run, observed_run.stopped, observed_run.records, observed_run.resumed
    phases, exported = observed_run.phases, observed_run.exported
    lines = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2, 3] and [r.weights_version for r in records] == [1, 2, 3, 4]
    for line in lines:
        stats = line["stats"]
        assert stats["episodes"] == 2 and stats["turns"] >= 2 and stats["samples"] >= 2
        assert stats["kinds"].get("compiled_only", 0) >= 1  # the memorized kernel reached the pool and built
        assert all(error < 1e-3 for error in line["sync_errors"].values())  # both adapters checked
        assert set(line["sync_errors"]) == {"generator", "optimizer"}
        assert set(line["seconds"]) == {"rollout", "judge", "update", "sync", "step"}
        assert stats["by_tier"]["easy"]["compile_rate"] == stats["compile_rate"]
    # steps 1 and 3 were rolled out during the update before them, on the weights before it; a
    # checkpoint's step (2, 4) never overlaps the next rollout, so step 2 is on-policy again
    assert [(line["overlapped"], line["stats"]["version_lag"]) for line in lines] == [
        (False, 0), (True, 1), (False, 0), (True, 1)]
    # step 2's first try met the dead policy (a new one took the step-2 weights, checked on their
    # probe), step 3's the timeout; both retries matched the run resumed without faults (below)
    assert [line["retries"] for line in lines] == [0, 0, 1, 1]
    assert phases.count((2, "rollout")) == 2
    assert phases.count((3, "rollout (overlapping the last update)")) == 2
    state = json.loads((run / "checkpoints" / "step-4" / "state.json").read_text())
    assert (state["step"], state["weights_version"]) == (4, 4)
    assert exported["step"] == 4 and exported["weights_version"] == 4 and exported["version_lag"] == 1
    assert exported["reward"] == pytest.approx(lines[-1]["stats"]["mean_reward"])
    assert exported["rate"] == pytest.approx(lines[-1]["stats"]["compile_rate"])
    assert exported["seconds"] == pytest.approx(lines[-1]["seconds"]["judge"], rel=1e-3)
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("reward/mean")] == [1, 2, 3, 4]

    # the resumed run ran steps 2 and 3 again, from the step-2 checkpoint, without the faults, and
    # ends where the whole run did; the log's lines of those steps were replaced, not added
    assert [(r.step, r.weights_version) for r in resumed] == [(2, 3), (3, 4)]
    resumed_lines = [json.loads(line) for line in (stopped / "steps.jsonl").read_text().splitlines()]
    assert [line["step"] for line in resumed_lines] == [0, 1, 2, 3]
    assert resumed_lines[:2] == lines[:2]
    for whole, again in zip(lines[2:], resumed_lines[2:]):
        assert (whole["stats"], whole["update"], whole["overlapped"]) == (
            again["stats"], again["update"], again["overlapped"])
        assert (whole["sync_via"], again["sync_via"], again["retries"]) == ("gloo", "object_store", 0)
    for role in ("generator", "optimizer"):
        settings, expected = read_adapter_folder(run / "checkpoints" / "step-4" / role)
        _, got = read_adapter_folder(stopped / "checkpoints" / "step-4" / role)
        assert settings.rank == 4 and expected.keys() == got.keys()
        assert all(torch.equal(expected[name], got[name]) for name in expected), role
    assert not (stopped / "checkpoints" / "step-4.partial").exists()


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None,
                    reason="Prometheus is not installed (Debian: apt-get install prometheus; .ci/run installs it)")
def test_every_panel_returns_data(observed_run):
    from cudarl.dashboards import DASHBOARDS

    assert observed_run.served == [200, 400, 408]
    gpu = torch.cuda.is_available()
    panels = [(name, panel) for name, (_, items) in DASHBOARDS.items() for panel in items
              if not panel.needs or (panel.needs == "gpu" and gpu)]
    empty: list[str] = []
    deadline = time.monotonic() + 120  # Ray's agent exports every few seconds; Prometheus scrapes each second
    while time.monotonic() < deadline:
        empty = [f"{name}: {panel.title}: {panel.expr}" for name, panel in panels
                 if not _query(observed_run.prometheus, panel.expr, observed_run.since)]
        if not empty:
            break
        time.sleep(3)
    assert not empty, "panels without data:\n" + "\n".join(empty)
