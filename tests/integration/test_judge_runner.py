"""The judge and the runner, run for real on the CPU with pure-PyTorch candidates: fresh seeded
trials, hidden shapes, input mutation, aliasing, tensor subclasses, threads, caches, early exits,
forged replies and changed input generation (``[inputs]``). (Kernels need the GPU; these rules do not.)"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from cudarl import config as settings
from cudarl.tester.judgement import judge_job
from cudarl.tester.judging import judge
from cudarl.tester.sandbox.parent import ChildLimits, ChildOutcome, run_child

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


def body(code: str) -> str:
    return GOOD.replace("        return 2 * torch.tanh(x)", code)


HARDCODED_SIZE = body("        return 2 * torch.tanh(x[:4096])")
MUTATES_INPUT = body("        x.mul_(1.0001)\n        return 2 * torch.tanh(x / 1.0001)")
RETURNS_INPUT = body("        x.copy_(2 * torch.tanh(x))\n        return x")
SUBCLASS = GOOD + '''

class Lazy(torch.Tensor):
    pass


_forward = ModelNew.forward
ModelNew.forward = lambda self, x: (2 * torch.tanh(x)).as_subclass(Lazy)
'''
CACHED_BY_SHAPE = GOOD.replace("    def forward(self, x):\n        return 2 * torch.tanh(x)", '''    cache = {}

    def forward(self, x):
        if x.shape not in self.cache:
            self.cache[x.shape] = 2 * torch.tanh(x)
        return self.cache[x.shape]''')
THREAD = body('''        import threading, time
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        return 2 * torch.tanh(x)''')
EXITS = body("        import os\n        os._exit(0)")
PATCHES_HARNESS = GOOD + """

torch.sys.modules["cudarl.tester.judging.correctness"].check_plain_tensor = lambda value, where: ""
"""
FORGES_REPLY = body('''        import os
        for fd in range(3, 40):
            try:
                os.write(fd, b'CRL1' + (20).to_bytes(8, 'little') + b'{"ok": true, "op": 1}')
            except OSError:
                pass
        return 2 * torch.tanh(x)''')
FORGES_RESULT = body('''        import json, os
        line = json.dumps({"event": "result", "outcome": "correct", "stage": "done", "reasons": []}) + "\\n"
        for fd in range(3, 40):
            try:
                os.write(fd, line.encode())
            except OSError:
                pass
        return torch.zeros_like(x)''')

CHANGES_INPUTS = GOOD + """

torch.set_default_dtype(torch.float64)  # the runner's get_inputs now makes other tensors
"""


def evaluate(tmp_path: Path, candidate: str, hidden: dict | None = None, reference: str = TASK,
             load_only: bool = False) -> dict:
    """One judge job: correctness on the CPU, or (``load_only``, a tester without a GPU) the
    candidate only loaded, the judge never importing torch and the runner building the reference
    in a request of its own before it imports the candidate."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "reference.py").write_text(reference)
    (tmp_path / "candidate.py").write_text(candidate)
    config = settings.TesterConfig()
    job = judge_job(config, tmp_path, tmp_path / "build", "90", 1e-4, 1e-4, hidden or {}, [],
                    cpu_correctness=not load_only, load_only=load_only)
    assert job.load_only == load_only
    child = run_child(judge.__name__, job.to_wire(), ChildLimits(timeout_s=120, memory_limit_mb=8192), cwd=tmp_path,
                      key=secrets.token_bytes(32))
    result = child.last("result")
    assert result is not None, child.stderr
    result["_child"] = child
    return result


def test_correct_candidate_passes_every_trial_including_hidden_shapes(tmp_path):
    result = evaluate(tmp_path, GOOD, hidden={"N": 1001})
    assert result["outcome"] == "correct", result["reasons"]
    report = result["correctness"]
    assert report["trials_passed"] == 5 and report["hidden_trials_passed"] == 2
    assert any("adopted and killed by the judge" in note for note in result["hardening"]["notes"])


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
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


@pytest.mark.parametrize("source, outcome, words", [
    (RETURNS_INPUT, "rejected", "[alias] output 0 shares memory with input 0"),  # the default suite's one
    pytest.param(SUBCLASS, "incorrect", "tensor subclass (Lazy)", marks=pytest.mark.slow),
    pytest.param(CACHED_BY_SHAPE, "incorrect", "trial 1:", marks=pytest.mark.slow),
    pytest.param(THREAD, "rejected", "[thread]", marks=pytest.mark.slow),
    pytest.param(EXITS, "crashed", "exited with code 0 without answering", marks=pytest.mark.slow),
    pytest.param(FORGES_REPLY, "rejected", "[channel]", marks=pytest.mark.slow),
    pytest.param(PATCHES_HARNESS, "rejected",
                 "[patched] the candidate replaced cudarl.tester.judging.correctness.check_plain_tensor",
                 marks=pytest.mark.slow),
    pytest.param(CHANGES_INPUTS, "rejected", "trial 0: [inputs] the candidate's process generated different inputs",
                 marks=pytest.mark.slow),
], ids=["returns-input", "subclass", "shape-cache", "thread", "early-exit", "forged-reply", "patches-harness",
        "changes-inputs"])
def test_runtime_defenses_name_the_trick(tmp_path, source, outcome, words):
    result = evaluate(tmp_path, source)
    assert result["outcome"] == outcome, result["reasons"]
    assert words in " ".join(result["reasons"])


def test_a_result_forged_on_every_descriptor_never_reaches_the_tester(tmp_path):
    result = evaluate(tmp_path, FORGES_RESULT)
    child: ChildOutcome = result["_child"]
    assert result["outcome"] == "rejected", result["reasons"]  # it reached only the runner's own pipe
    assert "[channel]" in result["reasons"][0]
    assert child.forged_messages == 0  # the runner never held the result pipe


FORK_BOMB = """
import os, time
for _ in range(200):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
""" + GOOD
ESCAPES = """
import subprocess
subprocess.Popen(["sleep", "4321"], start_new_session=True)
""" + GOOD
BIG_FILE = """
with open("big.bin", "wb") as handle:
    for _ in range(100):
        handle.write(bytes(1 << 20))
""" + GOOD


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_a_fork_bomb_is_stopped_at_the_process_limit(tmp_path):
    config = settings.TesterConfig()
    (tmp_path / "reference.py").write_text(TASK)
    (tmp_path / "candidate.py").write_text(FORK_BOMB)
    job = judge_job(config, tmp_path, tmp_path / "build", "90", 1e-4, 1e-4, {}, [], cpu_correctness=True)
    child = run_child(judge.__name__, job.to_wire(), ChildLimits.from_config(config.sandbox), cwd=tmp_path,
                      key=secrets.token_bytes(32))
    assert child.processes_exceeded and child.last("result") is None


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_processes_that_leave_the_group_die_with_the_candidate(tmp_path):
    import psutil

    result = evaluate(tmp_path, ESCAPES)
    assert result["outcome"] == "correct", result["reasons"]
    survivors = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "4321"]]
    assert not survivors, "a process started with setsid outlived the evaluation"


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_a_file_over_the_limit_is_a_resource_limit_verdict(tmp_path):
    result = evaluate(tmp_path, BIG_FILE)
    assert result["outcome"] == "resource_limit", result["reasons"]
    assert "File too large" in result["reasons"][0]



@pytest.mark.slow  # default-suite budget (tests/README.md): four judges of its own
def test_load_only_judging_blames_the_task_not_the_candidate_for_a_broken_reference(tmp_path):
    loaded = evaluate(tmp_path / "good", GOOD, load_only=True)
    assert loaded["outcome"] == "loaded", loaded["reasons"]
    assert any("adopted and killed by the judge" in note for note in loaded["hardening"]["notes"])
    failing_init = "class Model(nn.Module):\n    def __init__(self):\n        raise ValueError('bad task')\n"
    raises = evaluate(tmp_path / "raises", GOOD, reference=TASK.replace("class Model(nn.Module):", failing_init),
                      load_only=True)
    assert raises["outcome"] == "harness_error", raises["reasons"]
    assert raises["reasons"][0].startswith("the task's reference failed to load: ")
    assert "ValueError: bad task" in raises["reasons"][0]
    exits = evaluate(tmp_path / "exits", GOOD, reference=TASK + "\nimport os\nos._exit(3)\n", load_only=True)
    assert exits["outcome"] == "harness_error", exits["reasons"]
    assert "the runner ended while it loaded it" in exits["reasons"][0]
    broken = evaluate(tmp_path / "broken", "import torch\nraise RuntimeError('broken candidate')\n", load_only=True)
    assert broken["outcome"] == "load_error" and "broken candidate" in broken["reasons"][0], broken["reasons"]
