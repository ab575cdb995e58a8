"""Warm judges (limits applied, runner started, torch imported before the job) judge a candidate
like a cold judge: the same outcome, the candidate in its own folder, every process it starts
killed at the end; a warm judge whose runner was started with other settings replaces it; a
``reference_only`` job says plainly that it needs a GPU. On the CPU with a pure-PyTorch
candidate; the timed path (reference judges on a GPU) is in tests/gpu/test_tester_gpu.py."""

from __future__ import annotations

import secrets
from pathlib import Path

import psutil
import pytest

from cudarl import config as settings
from cudarl.tester.judgement import judge_job
from cudarl.tester.judging import judge
from cudarl.tester.sandbox.parent import ChildLimits, WarmChildren, run_child
from tests.integration.test_judge_runner import ESCAPES, GOOD, TASK
from tests.integration.test_warm_children import wait_until_idle

WRITES_HERE = ESCAPES.replace("import subprocess", 'import subprocess\nopen("written-by-candidate.txt", "w").close()')


def judge_in(pool: WarmChildren, workdir: Path, candidate: str, **job_fields) -> dict:
    """One judge job, in a warm judge from ``pool`` once it has finished starting."""
    workdir.mkdir()
    (workdir / "reference.py").write_text(TASK)
    (workdir / "candidate.py").write_text(candidate)
    job = judge_job(settings.TesterConfig(), workdir, workdir / "build", "90", 1e-4, 1e-4, {}, [],
                    cpu_correctness=True).with_changes(**job_fields)
    pool.prime()
    child = pool.take()
    assert child is not None
    wait_until_idle(child.process.pid)
    outcome = run_child(judge.__name__, job.to_wire(), pool.limits, cwd=workdir, key=secrets.token_bytes(32),
                        started=child)
    result = outcome.last("result")
    assert result is not None, outcome.stderr
    assert outcome.last("hello")["warm"] is True and outcome.last("hello")["pid"] == child.process.pid
    return result


@pytest.mark.slow  # default-suite budget (tests/README.md): several judges of its own
def test_warm_judges_judge_like_cold_ones(tmp_path):
    """One pool for three jobs (each warm judge costs a torch import on a small machine)."""
    limits = ChildLimits.from_config(settings.SandboxConfig())
    pool = WarmChildren(judge.__name__, limits, tmp_path / "scratch", 1, ("--warm-runner", "--warm-profiler"))
    try:
        result = judge_in(pool, tmp_path / "job", WRITES_HERE)
        other_settings = judge_in(pool, tmp_path / "other", GOOD, own_kernel_check=False)
        reference = judge_in(pool, tmp_path / "reference", "", reference_only=True)
    finally:
        pool.close()
    assert result["outcome"] == "correct", result["reasons"]
    assert result["correctness"]["trials_passed"] == 5
    assert any("adopted and killed by the judge" in note for note in result["hardening"]["notes"])
    assert (tmp_path / "job" / "written-by-candidate.txt").exists()  # the runner moved to the candidate's folder
    assert not list((tmp_path / "scratch").glob("written-by-candidate.txt"))
    survivors = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "4321"]]
    assert not survivors, "a process the candidate started outlived the warm judge"
    # Its runner was started with the profiler; this job turns the check off: a new runner judges it.
    assert other_settings["outcome"] == "correct", other_settings["reasons"]
    assert reference["outcome"] == "harness_error"
    assert "needs a CUDA GPU" in reference["reasons"][0]
