"""The served answer's kernel: the correct turn with the highest speedup, an untimed correct turn
below any timed one, the earliest on a tie, none when nothing was correct."""

from __future__ import annotations

from cudarl.agents.trajectory import TurnSample
from cudarl.serve.optimize import best_turn
from cudarl.tester.verdict import Outcome, Stage, TimingReport, TimingStats, Verdict


def _turn(outcome: Outcome, speedup: float | None = None) -> TurnSample:
    verdict = Verdict(task_id="t", candidate_id="c", candidate_hash="h", stage=Stage.TIMING, outcome=outcome)
    if speedup is not None:
        stats = TimingStats(median_ms=1.0, mean_ms=1.0, stdev_ms=0.0, min_ms=1.0, count=10, rse=0.0)
        verdict.timing = TimingReport(candidate=stats, reference=stats, speedup=speedup, l2_flush_bytes=0,
                                       device="gpu")
    return TurnSample(role="optimizer", prompt_ids=(1,), response_ids=(2,), logprobs=(-0.1,), weights_version=0,
                      verdict=verdict, candidate_hash="h", finished=True)


def test_the_fastest_correct_turn_wins_and_the_earliest_breaks_ties():
    turns = [_turn(Outcome.PASSED, 1.2), _turn(Outcome.INCORRECT), _turn(Outcome.PASSED, 2.5),
             _turn(Outcome.PASSED, 2.5), _turn(Outcome.COMPILE_ERROR)]
    assert best_turn(turns) == 2
    assert best_turn([_turn(Outcome.CORRECT), _turn(Outcome.PASSED, 0.4)]) == 1  # timed beats untimed
    assert best_turn([_turn(Outcome.CORRECT), _turn(Outcome.CORRECT)]) == 0
    assert best_turn([_turn(Outcome.COMPILED), _turn(Outcome.INCORRECT, 3.0)]) is None
    assert best_turn([]) is None
