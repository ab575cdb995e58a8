"""Rows for verl's datasets (``cudarl.verl_env.rows``): the fields verl reads, whole tasks split
with a seed, and the task rebuilt from a row (its JSON, or the suite by id)."""

from __future__ import annotations

import pytest

from cudarl.tasks.builtin import load_suite
from cudarl.verl_env.rows import AGENT_NAME, split_tasks, task_of, verl_row


def test_a_row_has_the_fields_verl_reads_and_gives_its_task_back():
    task = load_suite()[0]
    row = verl_row(task, 3, "train")
    assert row["agent_name"] == AGENT_NAME and row["reward_model"]["ground_truth"] == task.id
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and task.id in row["prompt"][1]["content"]
    assert row["extra_info"]["index"] == 3 and task_of(row["extra_info"]) == task
    assert task_of({"task_id": task.id}) == task  # no JSON: the built-in suite by id
    with pytest.raises(ValueError, match="names task 'nope', which is neither"):
        task_of(None, "nope")


def test_the_split_holds_out_whole_tasks_with_a_seed_and_keeps_one_for_training():
    tasks = load_suite()[:10]
    train, validation = split_tasks(tasks, 0.3, seed=1)
    assert len(validation) == 3 and not {t.id for t in train} & {t.id for t in validation}
    assert split_tasks(tasks, 0.3, seed=1) == (train, validation)
    assert split_tasks(tasks[:1], 0.9) == (tasks[:1], [])
    with pytest.raises(ValueError, match=r"validation_fraction must be in \[0, 1\)"):
        split_tasks(tasks, 1.0)
    with pytest.raises(ValueError, match="no tasks"):
        split_tasks([], 0.1)


def test_cudarl_tasks_export_writes_both_splits_and_refuses_a_bad_fraction(tmp_path):
    import subprocess
    import sys

    import pandas as pd

    run = [sys.executable, "-m", "cudarl.cli", "tasks", "export", "--format", "verl", "--tier", "easy"]
    done = subprocess.run([*run, "--out", str(tmp_path), "--val-fraction", "0.2"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    frames = {split: pd.read_parquet(tmp_path / f"{split}.parquet") for split in ("train", "val")}
    easy = [t.id for t in load_suite() if t.tier == "easy"]
    ids = [row["ground_truth"] for frame in frames.values() for row in frame["reward_model"]]
    assert sorted(ids) == sorted(easy) and len(frames["val"]) == round(len(easy) * 0.2)
    bad = subprocess.run([*run, "--out", str(tmp_path / "bad"), "--val-fraction", "1.5"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode != 0 and "error: validation_fraction must be in [0, 1)" in bad.stderr
