"""The child's correctness stage, run for real on the CPU with pure-PyTorch candidates: fresh
seeded trials, hidden shapes, input mutation. (Kernels need the GPU; these rules do not.)"""

from __future__ import annotations

import secrets
from pathlib import Path

from cudarl.config import TimingConfig
from cudarl.tester.sandbox import ChildLimits, run_child

TASK = '''
import torch
import torch.nn as nn
N = 4096


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''

GOOD = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return 2 * torch.tanh(x)
'''

HARDCODED_SIZE = GOOD.replace("return 2 * torch.tanh(x)", "return 2 * torch.tanh(x[:4096])")
MUTATES_INPUT = GOOD.replace("return 2 * torch.tanh(x)", "x.mul_(1.0001)\n        return 2 * torch.tanh(x / 1.0001)")


def evaluate(tmp_path: Path, candidate: str, hidden: dict | None = None) -> dict:
    (tmp_path / "reference.py").write_text(TASK)
    (tmp_path / "candidate.py").write_text(candidate)
    job = {"kind": "evaluate", "task_path": str(tmp_path / "reference.py"),
           "candidate_path": str(tmp_path / "candidate.py"), "build_root": str(tmp_path / "build"),
           "arch": "90", "cuda_cflags": [], "jobs": 1, "seed": secrets.randbits(63), "trials": 5,
           "atol": 1e-4, "rtol": 1e-4, "gpu_memory_fraction": 0.5, "hidden": hidden or {}, "hidden_trials": 2,
           "timing": TimingConfig().model_dump(), "cpu_correctness": True}
    child = run_child("cudarl.tester.child", job, ChildLimits(timeout_s=120, memory_limit_mb=4096), cwd=tmp_path)
    result = child.last("result")
    assert result is not None, child.stderr
    return result


def test_correct_candidate_passes_every_trial_including_hidden_shapes(tmp_path):
    result = evaluate(tmp_path, GOOD, hidden={"N": 1001})
    assert result["outcome"] == "correct", result["reasons"]
    report = result["correctness"]
    assert report["trials_passed"] == 5 and report["hidden_trials_passed"] == 2


def test_candidate_that_only_works_at_the_default_shape_fails_the_hidden_check(tmp_path):
    assert evaluate(tmp_path, HARDCODED_SIZE)["outcome"] == "correct"  # default shapes only: passes
    result = evaluate(tmp_path, HARDCODED_SIZE, hidden={"N": 5000})
    assert result["outcome"] == "incorrect"
    assert result["reasons"][0].startswith("hidden-shape trial 0: output has shape (4096,), expected (5000,)")
    assert result["correctness"]["trials_passed"] == 5


def test_candidate_that_writes_into_its_inputs_is_incorrect(tmp_path):
    result = evaluate(tmp_path, MUTATES_INPUT)
    assert result["outcome"] == "incorrect"
    assert "input 0 was modified" in result["reasons"][0]
    assert result["correctness"]["first_failure"]["trial"] == 0
