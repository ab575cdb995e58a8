"""KernelBench checkouts and the Sakana archive, from small files the tests write in their
real layouts and schema (the Sakana parquet is read through the real ``datasets`` library)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cudarl.tasks import TaskError
from cudarl.tasks.kernelbench import load_kernelbench
from cudarl.tasks.sakana import REQUIRED_COLUMNS, load_sakana
from tests.fixtures.tiny import TASK


def write_kernelbench(root, broken: bool):
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "level1" / "1_add.py").write_text(TASK)
    (root / "level1" / "10_add_again.py").write_text(TASK)
    (root / "level2" / "2_fused.py").write_text(TASK)
    if broken:
        (root / "level2" / "3_no_inputs.py").write_text(TASK.replace("def get_inputs", "def make_inputs"))


def test_kernelbench_levels_become_tiers_in_natural_order(tmp_path):
    write_kernelbench(tmp_path / "KernelBench", broken=False)
    tasks, report = load_kernelbench(tmp_path)  # the repository root works too
    assert [t.id for t in tasks] == ["kernelbench/level1/1_add", "kernelbench/level1/10_add_again",
                                     "kernelbench/level2/2_fused"]
    assert [t.tier for t in tasks] == ["easy", "easy", "medium"]
    assert report.seen == report.kept == 3


def test_kernelbench_bad_problem_names_the_file_or_is_counted(tmp_path):
    write_kernelbench(tmp_path, broken=True)
    with pytest.raises(TaskError, match="3_no_inputs.py.*lacks get_inputs"):
        load_kernelbench(tmp_path)
    tasks, report = load_kernelbench(tmp_path, strict=False)
    assert len(tasks) == 3 and report.seen == 4 and len(report.skipped) == 1
    assert "3_no_inputs.py" in report.skipped[0].where and "1 skipped" in report.summary()


def sakana_rows(count: int, level: int, bad_row: int | None = None) -> dict:
    rows = {column: [] for column in REQUIRED_COLUMNS}
    for i in range(count):
        values = {"Op_Name": f"op{i % 2}", "Level_ID": level, "Task_ID": i % 2, "Kernel_Name": f"k{i}",
                  "CUDA_Code": "__global__ void k() {}", "PyTorch_Code_Module": TASK,
                  "PyTorch_Code_Functional": "def module_fn(a, b): return a + b", "Correct": i % 3 != 0,
                  "CUDA_Speedup_Native": 1.0 + i / 10, "CUDA_Speedup_Compile": 0.9, "Max_Diff": 1e-6,
                  "Error": "" if i % 3 else "mismatch"}
        if i == bad_row:
            values["PyTorch_Code_Module"] = "class Model(:\n"
            values["Task_ID"] = 99
        for column, value in values.items():
            rows[column].append(value)
    return rows


def test_sakana_archive_from_local_parquet(tmp_path):
    pq.write_table(pa.table(sakana_rows(6, 1)), tmp_path / "level_1.parquet")
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table(sakana_rows(3, 2)), tmp_path / "data" / "level_2-00000-of-00001.parquet")
    tasks, examples, report = load_sakana(tmp_path, splits=("level_1", "level_2"))
    assert [t.id for t in tasks] == ["sakana/level1/0_op0", "sakana/level1/1_op1",
                                     "sakana/level2/0_op0", "sakana/level2/1_op1"]
    assert [t.tier for t in tasks] == ["easy", "easy", "medium", "medium"]
    assert len(examples) == 9 and report.kept == 9 and not report.skipped
    first = examples[0]
    assert first.task_id == "sakana/level1/0_op0" and first.correct is False and first.error == "mismatch"
    assert first.speedup_native == 1.0 and first.max_diff == 1e-6


def test_sakana_one_parquet_file_is_read_once(tmp_path):
    pq.write_table(pa.table(sakana_rows(4, 1)), tmp_path / "level_1.parquet")
    tasks, examples, report = load_sakana(tmp_path / "level_1.parquet")  # the default: three splits
    assert len(examples) == 4 and report.seen == 4 and report.kept == 4 and not report.skipped
    assert len(tasks) == len({e.task_id for e in examples})


def test_sakana_missing_columns_name_the_file(tmp_path):
    rows = sakana_rows(2, 1)
    del rows["Max_Diff"]
    pq.write_table(pa.table(rows), tmp_path / "level_1.parquet")
    with pytest.raises(TaskError, match="level_1.parquet: missing columns Max_Diff"):
        load_sakana(tmp_path, splits=("level_1",))


def test_sakana_bad_row_is_counted_or_names_the_row(tmp_path):
    pq.write_table(pa.table(sakana_rows(4, 1, bad_row=2)), tmp_path / "level_1.parquet")
    tasks, examples, report = load_sakana(tmp_path, splits=("level_1",))
    assert len(examples) == 3 and report.seen == 4 and len(report.skipped) == 1
    assert report.skipped[0].where.endswith("row 2") and "does not parse" in report.skipped[0].reason
    with pytest.raises(TaskError, match="row 2: .*does not parse"):
        load_sakana(tmp_path, splits=("level_1",), strict=True)


def test_sakana_missing_split_is_counted_not_silent(tmp_path):
    pq.write_table(pa.table(sakana_rows(2, 1)), tmp_path / "level_1.parquet")
    tasks, examples, report = load_sakana(tmp_path, splits=("level_1", "level_3"))
    assert len(examples) == 2 and any("level_3" in s.reason for s in report.skipped)
