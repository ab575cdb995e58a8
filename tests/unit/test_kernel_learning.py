"""The kernel-learning loop's bookkeeping without Ray or a model: a step's rewards, rates,
speedups and choice histograms from verdicts (``summarize``), the experiment's reward, the
per-task prompts, and ``LocalJudge``'s order and reuse (over a scripted tester: the real one is
in ``tests/integration/test_kernel_learning.py``)."""

from __future__ import annotations

import math

import pytest

from cudarl.config_rl import RewardConfig
from cudarl.reward import turn_reward
from cudarl.rl.kernel_choices import TASKS, choices, render
from cudarl.rl.kernel_learning import kernel_reward, summarize, task_prompt
from cudarl.rl.local_judge import LocalJudge
from cudarl.tasks.builtin import load_suite
from cudarl.tester.built import Built
from cudarl.tester.verdict import Outcome, TimingReport, TimingStats, Verdict


def verdict(task_id: str, outcome: Outcome, speedup: float | None = None) -> Verdict:
    made = Verdict.begin(task_id, "c", "hash").conclude(outcome)
    if speedup is not None:
        stats = TimingStats(median_ms=1.0, mean_ms=1.0, stdev_ms=0.0, min_ms=1.0, count=20, rse=0.0)
        made.timing = TimingReport(candidate=stats, reference=stats, speedup=speedup, l2_flush_bytes=0, device="gpu")
    return made


def test_a_step_summary_counts_rewards_rates_speedups_and_choices():
    picks = [("vector_add", 3), ("vector_add", 3), ("vector_add", 8), ("matmul", 7), ("matmul", 0), ("matmul", 2)]
    verdicts = [
        verdict("vector_add", Outcome.PASSED, 1.0),
        verdict("vector_add", Outcome.PASSED, 1.0),
        verdict("vector_add", Outcome.INCORRECT),
        verdict("matmul", Outcome.PASSED, 0.5),
        verdict("matmul", Outcome.PASSED, 0.125),
        verdict("matmul", Outcome.HARNESS_ERROR),
    ]
    config = kernel_reward()
    summary = summarize(("vector_add", "matmul"), picks, verdicts, config)
    assert [r.kind for r in summary["rewards"]] == [
        "correct",
        "correct",
        "incorrect",
        "correct",
        "correct",
        "harness_error",
    ]
    values = [1.0, 1.0, 0.0, 1.0 + 0.2 * -1, 1.0 + 0.2 * -3]  # the harness error is left out
    assert summary["mean_reward"] == pytest.approx(sum(values) / 5)
    assert summary["pass_rate"] == pytest.approx(4 / 6)
    assert summary["compile_rate"] == pytest.approx(5 / 6)
    assert summary["mean_speedup"] == pytest.approx((1 + 1 + 0.5 + 0.125) / 4)
    assert summary["geomean_speedup"] == pytest.approx(math.exp((math.log(0.5) + math.log(0.125)) / 4))
    assert summary["choices"]["vector_add"] == [0, 0, 0, 2, 0, 0, 0, 0, 1]
    assert summary["choices"]["matmul"][7] == summary["choices"]["matmul"][0] == 1
    assert all(sum(h) == 3 for h in summary["choices"].values())
    assert len(summary["choices"]["matmul"]) == len(choices("matmul"))
    assert summary["per_task"]["vector_add"] == {
        "pass_rate": pytest.approx(2 / 3),
        "mean_speedup": 1.0,
        "mean_reward": pytest.approx(2 / 3),
    }
    assert summary["per_task"]["matmul"]["mean_speedup"] == pytest.approx(0.3125)
    assert summary["kinds"] == {"correct": 4, "incorrect": 1, "harness_error": 1}


def test_compile_only_verdicts_give_zero_rewards_and_no_speedup():
    picks = [("row_sum", i) for i in range(4)]
    summary = summarize(("row_sum",), picks, [verdict("row_sum", Outcome.COMPILED) for _ in picks], kernel_reward())
    assert summary["mean_reward"] == 0.0 and summary["pass_rate"] == 0.0 and summary["compile_rate"] == 1.0
    assert summary["mean_speedup"] is None and summary["geomean_speedup"] is None
    assert summary["kinds"] == {"compiled_only": 4}


def test_the_experiments_reward_separates_slow_correct_kernels_the_default_clips_together():
    config = kernel_reward()
    assert isinstance(config, RewardConfig)  # the config's own check passed: correct beats failure
    quarter, half = (turn_reward(verdict("matmul", Outcome.PASSED, s), config).value for s in (0.25, 0.5))
    assert quarter < half
    default = RewardConfig()
    assert (
        turn_reward(verdict("matmul", Outcome.PASSED, 0.25), default).value
        == turn_reward(verdict("matmul", Outcome.PASSED, 0.5), default).value
    )
    slowest = turn_reward(verdict("matmul", Outcome.PASSED, 1 / 64), config).value
    assert slowest > turn_reward(verdict("matmul", Outcome.INCORRECT), config).value


def test_task_prompts_are_fixed_distinct_and_in_the_vocabulary():
    prompts = {task_id: task_prompt(task_id, 8, 128) for task_id in TASKS}
    assert prompts == {task_id: task_prompt(task_id, 8, 128) for task_id in TASKS}
    assert len(set(prompts.values())) == len(TASKS)
    assert all(len(p) == 8 and all(4 <= t < 128 for t in p) for p in prompts.values())
    assert task_prompt("matmul", 8, 128, seed=1) != prompts["matmul"]


class ScriptedTester:
    """Stands in for ``Tester``: counts builds and judges, answers from a table by source."""

    def __init__(self, outcomes: dict[str, Outcome]) -> None:
        self.outcomes, self.built, self.judged = outcomes, [], []

    def build(self, task, candidate) -> Built:
        self.built.append(candidate.id)
        return Built(Verdict.begin(task.id, candidate.id, candidate.source_hash), ready=True)

    def judge(self, task, candidate, built) -> Verdict:
        self.judged.append(candidate.id)
        return built.verdict.model_copy(deep=True).conclude(self.outcomes.get(candidate.id, Outcome.COMPILED))


def test_local_judge_keeps_order_and_judges_each_pair_once():
    tasks = {t.id: t for t in load_suite() if t.id in TASKS}
    a, b, c = render("vector_add", 0), render("vector_add", 8), render("row_sum", 1)
    tester = ScriptedTester({b.id: Outcome.INCORRECT})
    judge = LocalJudge(tester, build_workers=2, judge_workers=2)  # type: ignore[arg-type]
    pairs = [(tasks["vector_add"], a), (tasks["vector_add"], b), (tasks["vector_add"], a), (tasks["row_sum"], c)]
    first = judge(pairs)
    assert [v.candidate_id for v in first] == [a.id, b.id, a.id, c.id]
    assert [v.outcome for v in first] == [Outcome.COMPILED, Outcome.INCORRECT, Outcome.COMPILED, Outcome.COMPILED]
    assert [v.shared for v in first] == [False, False, True, False]
    assert sorted(tester.judged) == sorted([a.id, b.id, c.id]) and judge.judged == 3
    again = judge([(tasks["row_sum"], c), (tasks["vector_add"], b)])
    assert [v.outcome for v in again] == [Outcome.COMPILED, Outcome.INCORRECT] and all(v.shared for v in again)
    assert len(tester.judged) == 3  # nothing judged twice
    assert judge.known(tasks["vector_add"], b).outcome == Outcome.INCORRECT


def test_local_judge_never_reuses_harness_errors_and_can_judge_afresh():
    tasks = {t.id: t for t in load_suite() if t.id in TASKS}
    a = render("matmul", 7)
    tester = ScriptedTester({a.id: Outcome.HARNESS_ERROR})
    judge = LocalJudge(tester)  # type: ignore[arg-type]
    judge([(tasks["matmul"], a)])
    judge([(tasks["matmul"], a)])
    assert tester.judged == [a.id, a.id]
    fresh = LocalJudge(ScriptedTester({}), reuse=False)  # type: ignore[arg-type]
    fresh([(tasks["matmul"], a)])
    fresh([(tasks["matmul"], a)])
    assert fresh.judged == 2
    with pytest.raises(ValueError):
        LocalJudge(tester, judge_workers=0)  # type: ignore[arg-type]
