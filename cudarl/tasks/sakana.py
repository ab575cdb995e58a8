"""The Sakana AI CUDA Engineer archive: tasks from its PyTorch modules, kernels as examples.

Read with the ``datasets`` library, from a local folder of parquet files (one per split, the file
name containing the split, e.g. ``level_1.parquet`` or ``data/level_1-00000.parquet``) or from a
hub id. Each split has one row per generated kernel; rows sharing ``(Level_ID, Task_ID)`` share a
task. Kernels keep their recorded correctness and speedups (they are examples for the warm start
and for testing the tester, not trusted solutions).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudarl.tasks.kernelbench import LEVEL_TIERS
from cudarl.tasks.report import LoadReport
from cudarl.tasks.task import Task, TaskError

REQUIRED_COLUMNS = ("Op_Name", "Level_ID", "Task_ID", "Kernel_Name", "CUDA_Code", "PyTorch_Code_Module",
                    "PyTorch_Code_Functional", "Correct", "CUDA_Speedup_Native", "CUDA_Speedup_Compile",
                    "Max_Diff", "Error")
SPLITS = ("level_1", "level_2", "level_3")


@dataclass(frozen=True)
class KernelExample:
    """One archived kernel with what the archive recorded about it."""

    task_id: str
    kernel_name: str
    cuda_code: str
    functional_code: str
    correct: bool
    speedup_native: float | None
    speedup_compile: float | None
    max_diff: float | None
    error: str


def _split_files(root: Path, split: str) -> list[str]:
    return sorted(str(p) for p in root.rglob("*.parquet") if split in p.name)


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number  # NaN -> None


def _open_split(source: str, split: str):
    import datasets

    root = Path(source)
    if root.exists():
        files = _split_files(root, split) if root.is_dir() else [str(root)]
        if not files:
            return None, f"{root}: no parquet file for split {split}"
        try:
            return datasets.load_dataset("parquet", data_files={split: files}, split=split), ",".join(files)
        except Exception as exc:  # noqa: BLE001 - arrow and datasets raise many types for an unreadable file
            raise TaskError(f"{','.join(files)}: cannot be read as parquet ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc
    return datasets.load_dataset(source, split=split), f"{source}[{split}]"


def load_sakana(source: str | Path, splits: tuple[str, ...] = SPLITS,
                strict: bool = False) -> tuple[list[Task], list[KernelExample], LoadReport]:
    """Tasks (one per ``(Level_ID, Task_ID)``) and kernel examples from the archive.

    Missing columns always raise (naming the file). A row whose PyTorch module does not parse or
    lacks a required function raises with file and row when ``strict``; otherwise it is skipped
    and counted in the report, with its reason. ``source`` may also be one parquet file: it is
    read once, whatever ``splits`` says."""
    report = LoadReport(source=str(source))
    if Path(source).is_file():  # one parquet file is one table, read once whatever the splits
        splits = (Path(source).stem,)
    tasks: dict[str, Task] = {}
    examples: list[KernelExample] = []
    for split in splits:
        table, where = _open_split(str(source), split)
        if table is None:
            if strict:
                raise TaskError(where)
            report.skip(str(source), where)
            continue
        missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
        if missing:
            raise TaskError(f"{where}: missing columns {', '.join(missing)}")
        for index, row in enumerate(table):
            report.seen += 1
            place = f"{where} row {index}"
            try:
                level = int(row["Level_ID"])
                task_id = f"sakana/level{level}/{int(row['Task_ID'])}_{row['Op_Name']}"
                if task_id not in tasks:
                    task = Task(id=task_id, source=row["PyTorch_Code_Module"] or "",
                                tier=LEVEL_TIERS.get(level, "hard"),
                                description=f"Sakana archive level {level}: {row['Op_Name']}")
                    task.validate_source()
                    tasks[task_id] = task
            except (TaskError, TypeError, ValueError) as exc:
                if strict:
                    raise TaskError(f"{place}: {exc}") from exc
                report.skip(place, str(exc))
                continue
            examples.append(KernelExample(
                task_id=task_id, kernel_name=str(row["Kernel_Name"]), cuda_code=row["CUDA_Code"] or "",
                functional_code=row["PyTorch_Code_Functional"] or "", correct=bool(row["Correct"]),
                speedup_native=_number(row["CUDA_Speedup_Native"]),
                speedup_compile=_number(row["CUDA_Speedup_Compile"]), max_diff=_number(row["Max_Diff"]),
                error=str(row["Error"] or "")))
            report.kept += 1
    return sorted(tasks.values(), key=lambda t: t.id), examples, report
