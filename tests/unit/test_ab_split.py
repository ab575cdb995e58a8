"""The A/B split: proportions over a few hundred keys, stickiness through a weight change, the
rollback of a version whose verified rate falls, and refused settings."""

from __future__ import annotations

import pytest

from cudarl.serve.ab import ABSplit, hash_point


def test_proportions_follow_the_weights_over_many_clients():
    split = ABSplit({"v1": 0.8, "v2": 0.2})
    arms = [split.choose(f"client-{i}") for i in range(1000)]
    share = arms.count("v2") / len(arms)
    assert 0.15 < share < 0.25  # 200 expected; binomial sd 12.6
    assert split.state()["v1"]["served"] + split.state()["v2"]["served"] == 1000
    unkeyed = [split.choose() for _ in range(1000)]
    assert 0.15 < unkeyed.count("v2") / 1000 < 0.25


def test_a_key_keeps_its_version_and_replicas_agree():
    one, two = ABSplit({"a": 1, "b": 1}), ABSplit({"a": 1, "b": 1})
    first = {key: one.choose(key) for key in map(str, range(200))}
    assert all(one.choose(key) == arm for key, arm in first.items())  # sticky
    assert all(two.choose(key) == arm for key, arm in first.items())  # the same on another replica
    assert hash_point("x") == hash_point("x") and 0 <= hash_point("x") < 1


def test_a_weight_change_moves_only_keys_whose_version_left():
    split = ABSplit({"a": 1, "b": 1})
    before = {key: split.choose(key) for key in map(str, range(300))}
    split.set_weights({"a": 1, "b": 3, "c": 1})  # c is new; a and b stay in: nobody moves
    assert all(split.choose(key) == arm for key, arm in before.items())
    split.set_weights({"a": 0, "b": 1, "c": 1})  # a leaves: its keys move, the others stay
    after = {key: split.choose(key) for key in before}
    assert all(after[key] == arm for key, arm in before.items() if arm == "b")
    assert all(after[key] in ("b", "c") for key in before)
    newcomers = [split.choose(f"new-{i}") for i in range(400)]
    assert "a" not in newcomers and 0.35 < newcomers.count("c") / 400 < 0.65


def test_a_version_below_the_threshold_is_rolled_back_after_enough_answers():
    split = ABSplit({"good": 1, "bad": 1}, rollback_below=0.5, min_requests=10, window=20)
    for _ in range(9):
        assert split.record("bad", verified=False) is None  # not yet judged: 9 < 10 answers
    assert split.record("bad", verified=False) == "bad"
    state = split.state()["bad"]
    assert state["rolled_back"] and state["weight"] == 0 and state["verified_rate"] == 0.0
    assert {split.choose(f"k{i}") for i in range(100)} == {"good"}
    for _ in range(30):
        assert split.record("good", verified=False) is None  # the last version with weight stays
    split.set_weights({"good": 1, "bad": 1})  # given weight again: back, with a fresh window
    assert not split.state()["bad"]["rolled_back"] and split.state()["bad"]["window"] == 0


def test_the_window_forgets_old_outcomes():
    split = ABSplit({"a": 1, "b": 1}, rollback_below=0.5, min_requests=4, window=4)
    for _ in range(50):
        split.record("a", verified=True)
    outcomes = [split.record("a", verified=False) for _ in range(3)]
    assert outcomes == [None, None, "a"]  # the window holds 1 good of 4 after the third failure


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="at least one version"):
        ABSplit({})
    with pytest.raises(ValueError, match="add up to 0"):
        ABSplit({"a": 0})
    with pytest.raises(ValueError, match="0 or more"):
        ABSplit({"a": -1, "b": 2})
    with pytest.raises(ValueError, match="rate in"):
        ABSplit({"a": 1}, rollback_below=2)
    with pytest.raises(ValueError, match="min_requests"):
        ABSplit({"a": 1}, min_requests=10, window=5)
    with pytest.raises(KeyError, match="unknown version"):
        ABSplit({"a": 1}).record("z", True)
