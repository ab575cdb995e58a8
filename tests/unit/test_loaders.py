"""Task and candidate loaders: folders, sidecars, JSONL, and their error messages."""

import json

import pytest

from cudarl.tasks import TaskError, load_tasks
from cudarl.tasks.candidate import CandidateError, load_candidates
from tests.conftest import SOLUTIONS, SUITE
from tests.fixtures.tiny import TASK, candidate


def test_task_folder_with_sidecar_metadata(tmp_path):
    (tmp_path / "add.py").write_text(TASK)
    (tmp_path / "add.toml").write_text('tier = "easy"\ndtype = "float16"\n')
    (task,) = load_tasks(tmp_path)
    assert task.id == "add" and task.tier == "easy"
    assert task.tolerances(1e-4, 1e-2) == (1e-2, 1e-2)


def test_task_errors_name_the_file_and_problem(tmp_path):
    (tmp_path / "broken.py").write_text("def get_inputs(): pass\n")
    with pytest.raises(TaskError, match="broken.*lacks Model"):
        load_tasks(tmp_path)
    lines = tmp_path / "tasks.jsonl"
    lines.write_text(json.dumps({"id": "a", "source": TASK}) + "\n{not json\n")
    with pytest.raises(TaskError, match="tasks.jsonl:2"):
        load_tasks(lines)
    bad_tier = tmp_path / "tier.jsonl"
    bad_tier.write_text(json.dumps({"id": "a", "source": TASK, "tier": "legendary"}) + "\n")
    with pytest.raises(TaskError, match="tier"):
        load_tasks(bad_tier)


def test_candidate_folder_layouts_and_jsonl(tmp_path):
    (tmp_path / "add.py").write_text(candidate())
    (tmp_path / "mul").mkdir()
    (tmp_path / "mul" / "v1.py").write_text(candidate())
    found = load_candidates(tmp_path)
    assert [(c.task_id, c.id) for c in found] == [("add", "add"), ("mul", "mul/v1")]
    assert found[0].source_hash == found[1].source_hash  # same source, same hash
    lines = tmp_path / "c.jsonl"
    lines.write_text(json.dumps({"task_id": "add", "source": "x"}) + "\n" + json.dumps({"source": "y"}) + "\n")
    with pytest.raises(CandidateError, match="c.jsonl:2"):
        load_candidates(lines)


def test_builtin_suite_loads_and_every_solution_has_a_task():
    tasks = load_tasks(SUITE)
    solutions = load_candidates(SOLUTIONS)
    assert {c.task_id for c in solutions} <= {t.id for t in tasks}
