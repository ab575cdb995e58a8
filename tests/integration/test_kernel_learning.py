"""The kernel-learning loop (``cudarl.rl.kernel_learning``) on a CPU, through the real parts: a
tiny random Qwen2 in a real rollout engine, the real update workers on a local Ray, verified
weight syncs, and (first test) the real tester judging every rendered choice in compile-only
mode, where every verdict is ``compiled`` and every reward 0: the test checks the records and
the versions, not learning; it first judges every choice of every task once (the compile-only
evaluation of the whole grid: each loaded in the sandbox, its Python side imported and its
kernels loaded), so that every pick the loop makes is a verdict the judge already holds. The
second test gives the loop scripted verdicts (each choice passed at a fixed speedup, the grids'
wrong choices incorrect) and checks that it learns: what a GPU's verdicts should produce, without
a GPU."""

from __future__ import annotations

import pytest

from cudarl.rl.kernel_choices import TASKS, choices, render_all
from cudarl.rl.kernel_learning import KernelLearningSettings, make_policy, train_kernel_choices
from cudarl.rl.local_judge import LocalJudge
from cudarl.tasks.builtin import load_suite
from cudarl.tester import Outcome, Tester
from cudarl.tester.verdict import TimingReport, TimingStats, Verdict

VOCAB = 128


@pytest.fixture
def local_ray(shared_ray):
    return shared_ray


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_suite() if t.id in TASKS}


@pytest.mark.slow
def test_two_steps_with_the_real_tester_in_compile_only_mode(tmp_path, cache_root, tasks, local_ray):
    tester = Tester(cache_root=cache_root)
    if tester.has_gpu:
        pytest.skip("a compile-only check; with a GPU, benchmarks/kernel_learning.py runs the real thing")
    judge = LocalJudge(tester, build_workers=4, judge_workers=2)
    candidates = render_all()
    verdicts = judge([(tasks[c.task_id], c) for c in candidates])
    for candidate, verdict in zip(candidates, verdicts):
        assert verdict.outcome == Outcome.COMPILED, (candidate.id, verdict.outcome, verdict.reasons)
        assert any("no CUDA GPU" in s for s in verdict.skipped), verdict.skipped
    assert judge.judged == len(candidates)
    make_policy(str(tmp_path / "policy"), VOCAB)
    calls: list[int] = []

    def counting_judge(pairs):
        calls.append(len(pairs))
        return judge(pairs)

    settings = KernelLearningSettings(steps=2, group_size=2)
    log = train_kernel_choices(str(tmp_path / "policy"), VOCAB, counting_judge, tasks, settings)
    assert calls == [len(TASKS) * 2] * 2  # one judge call per step, every candidate in it
    assert [entry.weights_version for entry in log] == [0, 1]  # each step's samples came from the last sync
    assert [entry.synced_version for entry in log] == [1, 2]
    assert all(entry.probe_mean_error < 1e-4 for entry in log)
    for entry in log:
        assert entry.judged == len(TASKS) * 2
        assert {task: sum(counts) for task, counts in entry.choices.items()} == {task: 2 for task in TASKS}
        assert all(len(entry.choices[task]) == len(choices(task)) for task in TASKS)
        assert entry.kinds == {"compiled_only": len(TASKS) * 2}
        assert entry.compile_rate == 1.0 and entry.pass_rate == 0.0 and entry.mean_reward == 0.0
        assert entry.mean_speedup is None and entry.geomean_speedup is None
        assert entry.metrics["samples"] == len(TASKS) * 2
    assert judge.judged == len(candidates)  # every pick is one of the grid's choices: a verdict already held


# Speedups as a GPU might measure them (None: the grid's wrong choices, judged incorrect).
SCRIPTED = {
    "vector_add": [0.95, 0.8, 0.93, 1.0, 1.02, 0.97, 0.08, 0.4, None],
    "row_sum": [0.03, 1.1, 1.2, 1.0, 0.8, 1.2, 1.05, None, None],
    "matmul": [0.08, 0.03, 0.1, 0.2, 0.25, 0.3, 0.4, 0.55, None],
}


def scripted_judge(pairs):
    verdicts = []
    for task, candidate in pairs:
        index = int(candidate.id.split("/choice-")[1][:2])
        speedup = SCRIPTED[task.id][index]
        verdict = Verdict.begin(task.id, candidate.id, candidate.source_hash)
        if speedup is None:
            verdict.conclude(Outcome.INCORRECT, "scripted: wrong at the hidden shapes")
        else:
            stats = TimingStats(
                median_ms=1 / speedup, mean_ms=1 / speedup, stdev_ms=0.0, min_ms=1 / speedup, count=20, rse=0.0
            )
            reference = stats.model_copy(update={"median_ms": 1.0, "mean_ms": 1.0, "min_ms": 1.0})
            verdict.timing = TimingReport(
                candidate=stats, reference=reference, speedup=speedup, l2_flush_bytes=0, device="scripted"
            )
            verdict.conclude(Outcome.PASSED)
        verdicts.append(verdict)
    return verdicts


def test_scripted_verdicts_agree_with_the_grids():
    for task_id in TASKS:
        wrong = [c.expect == "wrong" for c in choices(task_id)]
        assert [s is None for s in SCRIPTED[task_id]] == wrong


@pytest.mark.slow
def test_the_loop_learns_to_pick_fast_correct_kernels_from_verdicts(tmp_path, tasks, local_ray):
    make_policy(str(tmp_path / "policy"), VOCAB)
    log = train_kernel_choices(str(tmp_path / "policy"), VOCAB, scripted_judge, tasks, KernelLearningSettings(steps=20))
    first, last = log[:4], log[-4:]

    def mean(entries, name):
        return sum(getattr(e, name) for e in entries) / len(entries)

    assert mean(last, "geomean_speedup") > 1.4 * mean(first, "geomean_speedup"), [e.geomean_speedup for e in log]
    assert mean(last, "mean_reward") > mean(first, "mean_reward") + 0.15
    assert mean(last, "pass_rate") >= mean(first, "pass_rate")
    for task_id in TASKS:  # the wrong choices are left behind
        assert sum(log[-1].choices[task_id][i] for i, s in enumerate(SCRIPTED[task_id]) if s is None) == 0
