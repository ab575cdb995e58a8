"""Stage 2 with the real nvcc: kernel-mode builds of real candidates, readable errors, resource
reports, and the content-hash cache."""

from __future__ import annotations

import time

import pytest

from cudarl.tasks import load_tasks
from cudarl.tasks.task import Task
from cudarl.tester import Candidate, Outcome, Stage, Tester
from tests.conftest import FIXTURES, SOLUTIONS, SUITE, make_tester_config
from tests.fixtures.tiny import TASK, candidate


@pytest.fixture(scope="module")
def tester(cache_root) -> Tester:
    return Tester(make_tester_config(compile={"mode": "kernel"}), cache_root=cache_root)


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_tasks(SUITE)}


def test_example_candidate_compiles_with_a_resource_report(tester, tasks):
    source = (SOLUTIONS / "vector_add.py").read_text()
    built = tester.build(tasks["vector_add"], Candidate(task_id="vector_add", id="honest", source=source))
    verdict = built.verdict
    assert built.ready, verdict.reasons
    report = verdict.compile
    arch = f"sm_{tester.arch}"  # this machine's GPU, or compile.fallback_arch without one
    assert report.mode == "kernel" and report.arch == arch and report.kernels
    assert all(k.registers > 0 and k.arch == arch for k in report.kernels)
    assert all("(" in k.name for k in report.kernels)  # demangled signatures


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_compile_error_comes_back_trimmed_and_readable(tester, tasks):
    source = (FIXTURES / "candidates" / "vector_add" / "compile_error.py").read_text()
    verdict = tester.evaluate(tasks["vector_add"], Candidate(task_id="vector_add", id="bad", source=source))
    assert verdict.outcome == Outcome.COMPILE_ERROR and verdict.stage == Stage.COMPILE
    errors = verdict.reasons[0]
    assert "error" in errors and "is undefined" in errors
    assert "/tmp/" not in errors and "[1/" not in errors  # no build paths, no ninja noise
    assert len(errors.splitlines()) <= 41


def test_same_source_is_never_built_twice(tester):
    from cudarl.tasks import Task

    task = Task(id="add", source=TASK)
    source = candidate("# cache probe")
    first = tester.build(task, Candidate(task_id="add", id="a", source=source))
    started = time.monotonic()
    second = tester.build(task, Candidate(task_id="add", id="b", source=source))
    assert not first.verdict.compile.cached and second.verdict.compile.cached
    assert second.verdict.compile.cache_key == first.verdict.compile.cache_key
    assert time.monotonic() - started < 1.0
    changed = tester.build(task, Candidate(task_id="add", id="c", source=source + "\n# edit"))
    assert not changed.verdict.compile.cached
    assert not list(tester.scratch.glob("build-*"))  # a build leaves no work folder behind


def test_guard_failures_never_reach_the_compiler(tester, tasks):
    for name, outcome in [("syntax_error", Outcome.PARSE_ERROR), ("no_modelnew", Outcome.REJECTED),
                          ("no_cuda", Outcome.REJECTED)]:
        source = (FIXTURES / "candidates" / "vector_add" / f"{name}.py").read_text()
        verdict = tester.evaluate(tasks["vector_add"], Candidate(task_id="vector_add", id=name, source=source))
        assert verdict.outcome == outcome and verdict.stage == Stage.GUARD and verdict.compile is None
        assert verdict.reasons


@pytest.mark.slow
def test_full_extension_build_without_a_gpu(cache_root):
    """The real ``load_inline`` build (needs a CUDA build of torch, not a GPU)."""
    import torch

    if torch.version.cuda is None:
        pytest.skip("a full extension build needs a CUDA build of torch; this torch is CPU-only")
    from cudarl.tasks import Task

    tester = Tester(make_tester_config(compile={"mode": "extension"}), cache_root=cache_root)
    verdict = tester.evaluate(Task(id="add", source=TASK), Candidate(task_id="add", id="ext", source=candidate()))
    assert verdict.compile.mode == "extension" and verdict.compile.kernels, verdict.reasons
    assert verdict.outcome == Outcome.COMPILED, verdict.reasons


def test_a_build_past_its_time_limit_is_compile_timeout_and_leaves_no_process(cache_root):
    """``compile.timeout_s`` is wall time for the whole build child; past it the child's process
    group (nvcc and its tools included) is killed and the verdict is ``compile_timeout``, which is
    not cached (the machine's load may be to blame: the next build tries again)."""
    import psutil

    config = make_tester_config(compile={"mode": "extension", "timeout_s": 0.5, "precompiled_header": False,
                                         "warm_children": 0})
    slow = Tester(config, cache_root=cache_root)
    before = {process.pid for process in psutil.Process().children(recursive=True)}  # e.g. other tests' warm children
    source = (SOLUTIONS / "vector_add.py").read_text()
    task = {t.id: t for t in load_tasks(SUITE)}["vector_add"]
    for attempt in range(2):
        built = slow.build(task, Candidate(task_id="vector_add", id=f"slow{attempt}", source=source))
        assert built.verdict.outcome == Outcome.COMPILE_TIMEOUT, built.verdict.reasons
        assert "timed out" in built.verdict.reasons[0] and not built.verdict.compile.cached
    tools = ("nvcc", "cicc", "cudafe++", "ptxas", "compile_child", "ninja", "c++", "g++")
    deadline = time.monotonic() + 10
    while True:
        left = []
        for process in psutil.Process().children(recursive=True):
            if process.pid in before:
                continue
            try:
                if any(tool in " ".join(process.cmdline()) for tool in tools):
                    left.append(process.name())
            except psutil.NoSuchProcess:
                pass
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, left


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_sources_assembled_at_run_time_meet_the_text_rules_before_anything_is_built(cache_root, tmp_path):
    """The guard reads string constants; a C++ source joined at run time (``"sys" + "tem("``)
    is checked where ``load_inline`` receives it, before any compiler runs, even when the
    candidate catches the refusal."""
    from cudarl.tester.build.guard import inspect_source
    from tests.fixtures.tiny import KERNEL_PREAMBLE, MODEL_NEW

    marker = tmp_path / "ran"
    joined = f'cpp = "static int ran = sys" + "tem(\\"touch {marker}\\");"\n'
    plain = KERNEL_PREAMBLE.replace('cpp_sources=""', "cpp_sources=cpp").replace("ext = load_inline",
                                                                                 joined + "ext = load_inline")
    caught = plain.replace("ext = load_inline(", "try:\n    ext = load_inline(").replace(
        "functions=[])", "functions=[])\nexcept Exception:\n    ext = None")
    settings = make_tester_config(compile={"mode": "extension", "warm_children": 0})
    task = Task(id="add", source=TASK)
    # Built first with the static rules off (so built for real): that build must not serve the
    # tester with the rules on, which never saw the sources load_inline got.
    unguarded = Tester(settings.with_changes({"hardening.static_rules": False}), cache_root=cache_root)
    assert unguarded.build(task, Candidate(task_id="add", id="plain", source=plain + MODEL_NEW)).ready
    tester = Tester(settings, cache_root=cache_root)
    for name, source in (("plain", plain), ("caught", caught)):
        assert inspect_source(source + MODEL_NEW).ok  # unseen statically
        built = tester.build(task, Candidate(task_id="add", id=name, source=source + MODEL_NEW))
        assert built.verdict.outcome == Outcome.REJECTED, (name, built.verdict.reasons)
        assert "[cuda-source]" in built.verdict.reasons[0] and "starts processes" in built.verdict.reasons[0]
        assert not marker.exists()


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_code_run_at_build_time_cannot_write_outside_its_folders(cache_root, tmp_path):
    """With the static rules off (nothing refused before the build), a candidate whose import
    writes a file elsewhere gets a ``compile_error`` naming the refused path, and nothing appears
    there (``sandbox.restrict_writes``, Landlock); its own build still writes where it must, and
    a relative write at import (its working folder is its own temporary folder) goes through."""
    from cudarl.tester.sandbox.write_guard import landlock_abi

    if landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock: writes cannot be confined here")
    outside = tmp_path / "outside"
    outside.mkdir()
    writes = f'open("scratch.txt", "w").write("x")\nopen("{outside / "planted"}", "w").write("x")\n'
    settings = make_tester_config(compile={"mode": "extension", "warm_children": 0},
                                  hardening={"static_rules": False})
    tester = Tester(settings, cache_root=cache_root)
    built = tester.build(Task(id="add", source=TASK), Candidate(task_id="add", id="writer", source=candidate(writes)))
    assert built.verdict.outcome == Outcome.COMPILE_ERROR, built.verdict.reasons
    assert "Permission denied" in built.verdict.reasons[0] and "planted" in built.verdict.reasons[0]
    assert list(outside.iterdir()) == []


@pytest.mark.slow  # default-suite budget (tests/README.md): a child process or build of its own
def test_environment_set_by_the_candidate_never_reaches_its_build(cache_root):
    """``os.environ`` at module level is allowed (build settings), but the build runs with the
    harness's environment: a candidate pointing torch's builder at another "nvcc" builds as usual."""
    override = 'import os\nos.environ["PYTORCH_NVCC"] = "/bin/false"\n'
    source = candidate().replace("import torch\n", override + "import torch\n", 1)
    settings = make_tester_config(compile={"mode": "extension", "warm_children": 0})
    built = Tester(settings, cache_root=cache_root).build(Task(id="add", source=TASK),
                                                          Candidate(task_id="add", id="env", source=source))
    assert "PYTORCH_NVCC" in source and built.ready, built.verdict.reasons


def test_build_options_that_write_outside_are_refused_by_name_even_when_assembled_at_run_time(cache_root, tasks):
    """The escape corpus's compiler-option cases (``tests/exploits/vector_add/c13_build_flags_*``):
    literal options stop at the guard; options assembled at run time stop in the compile child's
    loading hook, before nvcc runs. Both with the static rules off: the allowlist is not one of them."""
    from pathlib import Path

    from tests.fixtures.exploits import load_exploits

    tester = Tester(make_tester_config(compile={"mode": "extension", "precompiled_header": False},
                                       hardening={"static_rules": False}), cache_root=cache_root)
    cases = [e for e in load_exploits() if e.name.startswith("c13_build_flags")]
    assert len(cases) == 2
    for exploit in cases:
        Path(exploit.must_not_create).unlink(missing_ok=True)
        verdict = tester.evaluate(tasks["vector_add"], exploit.candidate())
        assert verdict.outcome == Outcome.REJECTED, (exploit.id, verdict.outcome, verdict.reasons)
        assert any(exploit.reason_unguarded in reason for reason in verdict.reasons), (exploit.id, verdict.reasons)
        assert not Path(exploit.must_not_create).exists(), exploit.id


def test_kernel_mode_nvcc_runs_in_a_child_under_the_build_limits(tmp_path, tasks):
    """Kernel mode (the default without a GPU) runs nvcc in a compile child (``nvcc_child``), not in
    the tester's process: under a memory limit no real build fits in, and under a time limit no
    build finishes in, the verdicts name the limit, and no compiler is left behind. (A cache of its
    own: a build killed by the memory limit is cached like any failed build, and the cache key does
    not hold the limits.)"""
    import psutil

    source = (SOLUTIONS / "vector_add.py").read_text()
    for sandbox, compile_settings, words in (({"memory_limit_mb": 64}, {}, "exceeded the 64 MB memory limit"),
                                             ({}, {"timeout_s": 0.3}, "timed out after")):
        tester = Tester(make_tester_config(compile={"mode": "kernel", **compile_settings}, sandbox=sandbox),
                        cache_root=tmp_path / str(len(words)))
        built = tester.build(tasks["vector_add"], Candidate(task_id="vector_add", id="limited", source=source))
        assert not built.ready and words in built.verdict.compile.errors, built.verdict.compile.errors
    assert built.verdict.outcome == Outcome.COMPILE_TIMEOUT and not tester.cache.lookup(built.verdict.compile.cache_key)
    left = [p for p in psutil.Process().children(recursive=True) if p.name() in ("nvcc", "cicc", "ptxas", "cudafe++")]
    assert not left, left
