"""The README's first command, ``scripts/demo.sh``, from a clean copy of the checkout (its tracked
and unignored files only: no environment, no caches), with one GRPO step (the loop's later steps
are the RL driver test's) after the demo's own warm start (40 steps per role: what the tiny model
needs to answer with kernels that build; 10 were too few): it sets itself up, warm-starts a tiny
model built on the spot, runs a GRPO step on the real tester pool, and leaves a report whose
contents are checked here (the log, plots that are PNG files, the best kernels with their
verdicts). Bad arguments end in one line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _clean_copy(target: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_demo_from_a_clean_copy_writes_its_report(tmp_path):
    from cudarl.demo.plan import DEMO_TASKS
    from cudarl.tester.build.toolchain import gpu_available

    gpu = gpu_available()
    checkout = _clean_copy(tmp_path / "checkout")
    out = checkout / "demo-out"  # relative, as a user types it: the update workers run in another folder
    run = subprocess.run(["bash", "scripts/demo.sh", "--steps", "1", "--sft-steps", "40", "--out", "demo-out"],
                         cwd=checkout, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-4000:]
    said = "a CUDA GPU is here: verdicts are full" if gpu else "no CUDA GPU here: verdicts are compile-only"
    assert said in run.stderr.split("[1/3]")[0]  # said in its first lines
    assert "cudarl demo: GRPO steps" in run.stdout and "report in" in run.stdout

    report = out / "report"
    summary = json.loads((report / "summary.json").read_text())
    assert summary["verdicts"] == ("full" if gpu else "compile-only (no GPU)") and summary["gpu"] is gpu
    machine = summary["machine"]  # a copy without git history: no commit, the package's version instead
    assert machine["cudarl"] and machine["torch"] and (machine["gpu"] is not None) is gpu and "commit" in machine
    assert [row["step"] for row in summary["steps"]] == [1]
    assert [row["weights_version"] for row in summary["steps"]] == [2]  # the warm start is version 1
    for row in summary["steps"]:
        assert 0.0 <= row["compile_rate"] <= 1.0 and 0.0 <= row["pass_rate"] <= 1.0
        if not gpu:
            assert row["pass_rate"] == 0.0  # nothing passes without a GPU
    assert summary["warm_start"]["train"]["rows"] == 2 * len(DEMO_TASKS)  # both roles, every task
    steps_log = [json.loads(line) for line in (out / "train" / "steps.jsonl").read_text().splitlines()]
    assert len(steps_log) == 1
    for name in ("reward.png", "rates.png", "speedup.png"):
        assert (report / name).read_bytes()[:8] == PNG_SIGNATURE, name
    assert summary["best_kernels"], "no kernel was judged"
    for task, entry in summary["best_kernels"].items():
        verdict = json.loads((report / "kernels" / f"{task}.json").read_text())
        assert verdict["task_id"] == task and verdict["outcome"] == entry["outcome"]
        assert (report / entry["file"]).read_text().strip()
    for role in ("generator", "optimizer"):
        curve = json.loads((out / "sft" / role / "loss.json").read_text())
        assert curve, role
    assert summary["settings"] == {"steps": 1, "sft_steps": 40, "config": None}


def test_bad_arguments_end_in_one_line(tmp_path):
    import sys

    for arguments, expected in ((["--steps", "0"], "--steps and --sft-steps must be at least 1"),
                                (["--config", str(tmp_path / "none.toml")], "config file not found"),
                                (["--model", str(tmp_path / "nothing")], "cudarl demo: model")):
        run = subprocess.run([sys.executable, "-m", "cudarl.cli", "demo", "--out", str(tmp_path / "out"), *arguments],
                             capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert run.returncode == 2, run.stderr[-2000:]
        lines = [line for line in run.stderr.splitlines() if line.strip() and "Warning" not in line]
        assert expected in run.stderr and "Traceback" not in run.stderr, run.stderr[-2000:]
        assert len([line for line in lines if expected in line]) == 1
