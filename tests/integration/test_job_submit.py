"""Jobs on a Ray head started with ``ray start --head``, submitted through Ray's job API as a user
submits them to a cluster: a one-step training run (a tiny model, compile-only verdicts) and a
tester eval of the suite's nvrtc solutions (NVRTC builds in seconds, where a torch-header build
takes half a minute); both end SUCCEEDED with their outputs written."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudarl import env
from tests.conftest import SUITE
from tests.fixtures.processes import ray_temp_dir, stop_processes_naming
from tests.fixtures.ray_session import free_port as _free_port

RAY = str(Path(sys.executable).with_name("ray"))


@pytest.mark.slow
def test_a_training_run_and_an_eval_submitted_as_jobs_succeed(tmp_path, own_ray):
    """``own_ray``: the session's Ray is shut down, so the head has the machine's CPUs."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    from cudarl.demo.tiny import build_tiny_model
    from cudarl.tasks.builtin import suite_solutions

    kernels = [c.source for c in suite_solutions({"vector_add", "relu"}, form="nvrtc")]
    model = build_tiny_model(tmp_path / "model", kernels)
    gcs, dashboard, head = _free_port(), _free_port(), ray_temp_dir()
    # the dashboard agent's ports too: another Ray on the machine may hold the defaults, and a job
    # agent that cannot listen refuses every job ("No available agent to submit job")
    agent_ports = [f"--dashboard-agent-listen-port={_free_port()}", f"--dashboard-agent-grpc-port={_free_port()}"]
    # token authentication off, as this process's client has it (a cluster reachable only from here)
    environment = {**os.environ, env.RAY_AUTH_MODE: "disabled"}
    subprocess.run([RAY, "start", "--head", f"--port={gcs}", f"--dashboard-port={dashboard}", "--num-cpus=6",
                    "--dashboard-host=127.0.0.1", "--disable-usage-stats", f"--temp-dir={head}", *agent_ports],
                   check=True, capture_output=True, timeout=180, env=environment)
    try:
        client = JobSubmissionClient(f"http://127.0.0.1:{dashboard}")
        python = shlex.quote(sys.executable)
        train = client.submit_job(entrypoint=(
            f"{python} -m cudarl.cli train --model {shlex.quote(str(model))} --address auto "
            f"--out {shlex.quote(str(tmp_path / 'run'))} --set train.steps=1 --set train.tasks_per_step=1 "
            "--set train.group_size=2 --set train.optimizer_turns=0 --set train.max_new_tokens=64 "
            "--set train.engine=hf --set tester.compile.mode=kernel --set pool.min_compile_workers=1 "
            "--set pool.max_compile_workers=1 --set 'curriculum.tiers=[\"easy\"]'"))
        evaluate = client.submit_job(entrypoint=(
            f"{python} -m cudarl.cli eval {SUITE} {SUITE / 'solutions_nvrtc'} --only vector_add,relu --address auto "
            f"--out {shlex.quote(str(tmp_path / 'report.json'))}"))
        deadline = time.monotonic() + 900
        states = {}
        while time.monotonic() < deadline:
            states = {job: client.get_job_status(job) for job in (train, evaluate)}
            if all(state in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED) for state in states.values()):
                break
            time.sleep(2)
        logs = {job: client.get_job_logs(job)[-3000:] for job in (train, evaluate)}
        assert states == {train: JobStatus.SUCCEEDED, evaluate: JobStatus.SUCCEEDED}, (states, logs)
    finally:
        stop_processes_naming(str(head))  # this head only; never `ray stop` (every Ray on the machine)
    lines = (tmp_path / "run" / "steps.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["weights_version"] == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert sorted(row["task_id"] for row in report["verdicts"]) == ["relu", "vector_add"], report.keys()
    outcomes = {row["task_id"]: row["outcome"] for row in report["verdicts"]}
    assert set(outcomes.values()) <= {"compiled", "passed"}, outcomes  # each nvrtc solution built (and ran, on a GPU)
