"""Curriculum gates, sampling and exact resumption, with simulated results."""

import json

import pytest

from cudarl.config import CurriculumConfig
from cudarl.tasks import Task
from cudarl.tasks.curriculum import Curriculum

SOURCE = "class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n"


def suite() -> list[Task]:
    return [Task(id=f"{tier}{i}", source=SOURCE, tier=tier) for tier in ("easy", "medium", "hard") for i in range(4)]


def feed(curriculum: Curriculum, count: int, compiled: float, passed: float, speedup: float | None = 1.0):
    """Record ``count`` results of the current tier, successes spread evenly at the given rates
    (so every window sees those rates); returns the events."""
    events = []
    for i in range(count):
        task = curriculum.sample(1)[0]
        while task.tier != curriculum.tier:
            task = curriculum.sample(1)[0]
        ok_compile = int((i + 1) * compiled) > int(i * compiled)  # spread evenly over the run
        ok_pass = ok_compile and int((i + 1) * passed) > int(i * passed)
        event = curriculum.record(task.id, ok_compile, ok_pass, speedup if ok_pass else None)
        if event:
            events.append(event)
    return events


def test_no_promotion_before_the_window_is_full_even_with_perfect_results():
    curriculum = Curriculum(suite(), CurriculumConfig(window=20))
    assert feed(curriculum, 19, 1.0, 1.0) == [] and curriculum.tier == "easy"
    assert feed(curriculum, 1, 1.0, 1.0) == ["promoted"] and curriculum.tier == "medium"


def test_promotion_needs_every_gate():
    config = CurriculumConfig(window=20)
    low_pass = Curriculum(suite(), config)
    assert feed(low_pass, 60, 1.0, 0.7) == [] and low_pass.tier == "easy"  # pass rate 0.7 <= 0.75
    low_compile = Curriculum(suite(), config)
    assert feed(low_compile, 60, 0.85, 0.8) == []
    speed = Curriculum(suite(), CurriculumConfig(window=20, speedup_gate=1.2))
    assert feed(speed, 40, 1.0, 1.0, speedup=1.1) == []
    assert feed(speed, 20, 1.0, 1.0, speedup=1.5) == ["promoted"]


def test_last_tier_never_promotes_and_replay_draws_from_earlier_tiers():
    curriculum = Curriculum(suite(), CurriculumConfig(window=10, replay_fraction=0.3))
    feed(curriculum, 10, 1.0, 1.0)
    feed(curriculum, 10, 1.0, 1.0)
    assert curriculum.tier == "hard" and feed(curriculum, 30, 1.0, 1.0) == []
    tiers = [t.tier for t in curriculum.sample(2000)]
    replay = sum(t != "hard" for t in tiers) / len(tiers)
    assert 0.25 < replay < 0.35 and "easy" in tiers and "medium" in tiers


def test_results_of_replayed_tasks_do_not_move_the_gates():
    curriculum = Curriculum(suite(), CurriculumConfig(window=5))
    feed(curriculum, 5, 1.0, 1.0)
    assert curriculum.tier == "medium"
    for _ in range(10):
        assert curriculum.record("easy0", True, True) is None
    assert curriculum.gates()["results"] == 0


def test_demotion_when_enabled():
    curriculum = Curriculum(suite(), CurriculumConfig(window=10, demotion=True))
    feed(curriculum, 10, 1.0, 1.0)
    assert feed(curriculum, 10, 1.0, 0.1) == ["demoted"] and curriculum.tier == "easy"
    off = Curriculum(suite(), CurriculumConfig(window=10))
    feed(off, 10, 1.0, 1.0)
    assert feed(off, 30, 1.0, 0.0) == [] and off.tier == "medium"


def test_resumes_exactly_from_a_saved_state():
    config = CurriculumConfig(window=16, replay_fraction=0.25, seed=7)
    original = Curriculum(suite(), config)
    feed(original, 16, 1.0, 1.0)
    feed(original, 9, 1.0, 0.5)
    state = json.loads(json.dumps(original.state_dict()))  # survives a JSON checkpoint
    resumed = Curriculum(suite(), config)
    resumed.load_state_dict(state)
    assert [t.id for t in resumed.sample(50)] == [t.id for t in original.sample(50)]
    assert feed(resumed, 7, 1.0, 1.0) == feed(original, 7, 1.0, 1.0)
    assert resumed.state_dict() == original.state_dict()


def test_state_from_another_config_is_refused():
    saved = Curriculum(suite(), CurriculumConfig(window=16)).state_dict()
    with pytest.raises(ValueError, match="different curriculum config"):
        Curriculum(suite(), CurriculumConfig(window=32)).load_state_dict(saved)
