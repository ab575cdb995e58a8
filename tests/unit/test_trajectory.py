"""Trajectory records: the loss mask covers exactly the generated tokens, a ``full``-mode episode
is one sequence whose turns extend each other, and inconsistent records are refused."""

from __future__ import annotations

import pytest

from cudarl.agents.trajectory import Trajectory, TurnSample
from cudarl.tester.verdict import Outcome, Verdict


def _verdict(outcome: Outcome = Outcome.COMPILED) -> Verdict:
    verdict = Verdict.begin("vector_add", "c", "hash")
    verdict.conclude(outcome, "done")
    return verdict


def _turn(prompt, response, version=0) -> TurnSample:
    return TurnSample(role="optimizer", prompt_ids=tuple(prompt), response_ids=tuple(response),
                      logprobs=tuple(-0.5 for _ in response), weights_version=version, verdict=_verdict(),
                      candidate_hash="h", finished=True)


def test_the_loss_mask_is_one_exactly_on_the_response():
    turn = _turn([5, 6, 7], [8, 9])
    assert turn.loss_mask == (0, 0, 0, 1, 1)


def test_a_full_mode_episode_is_one_sequence_with_feedback_masked():
    first = _turn([1, 2], [3, 4])
    second = _turn([1, 2, 3, 4, 50, 51], [5], version=1)  # 50, 51: feedback tokens appended
    episode = Trajectory("vector_add", "e0", (first, second), "full", "max_turns")
    ids, mask = episode.as_sequence()
    assert ids == (1, 2, 3, 4, 50, 51, 5) and mask == (0, 0, 1, 1, 0, 0, 1)
    assert episode.weights_versions == (0, 1)


def test_records_that_do_not_fit_together_are_refused():
    with pytest.raises(ValueError, match="log-probs"):
        TurnSample(role="generator", prompt_ids=(1,), response_ids=(2, 3), logprobs=(-1.0,), weights_version=0,
                   verdict=_verdict(), candidate_hash=None, finished=False)
    rerendered = Trajectory("vector_add", "e1", (_turn([1, 2], [3]), _turn([1, 9, 3, 7], [4])), "full", "max_turns")
    with pytest.raises(ValueError, match="does not extend"):
        rerendered.as_sequence()
    with pytest.raises(ValueError, match="full"):
        Trajectory("vector_add", "e2", (_turn([1], [2]),), "code_and_feedback", "max_turns").as_sequence()
