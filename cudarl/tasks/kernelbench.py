"""Tasks from a KernelBench checkout: ``level1``..``level4`` folders of problem files.

Tiers follow the level (1: single ops -> easy, 2: fused ops -> medium, 3 and 4: architectures
and whole models -> hard). Ids are ``kernelbench/level<N>/<file stem>``. A problem that does not
parse or lacks ``Model``/``get_inputs``/``get_init_inputs`` raises with its file name, or, with
``strict=False``, is skipped and counted in the report.
"""

from __future__ import annotations

import re
from pathlib import Path

from cudarl.tasks.report import LoadReport
from cudarl.tasks.task import Task, TaskError, Tier

LEVEL_TIERS: dict[int, Tier] = {1: "easy", 2: "medium", 3: "hard", 4: "hard"}


def load_kernelbench(root: Path | str, levels: tuple[int, ...] = (1, 2, 3, 4),
                     strict: bool = True) -> tuple[list[Task], LoadReport]:
    """Load every problem file under ``root/level<N>/`` (``root`` may also be ``.../KernelBench``)."""
    root = Path(root)
    if (root / "KernelBench").is_dir() and not any((root / f"level{n}").is_dir() for n in levels):
        root = root / "KernelBench"
    folders = [(n, root / f"level{n}") for n in levels if (root / f"level{n}").is_dir()]
    if not folders:
        raise TaskError(f"{root}: no level1..level4 folders (is this a KernelBench checkout?)")
    report = LoadReport(source=str(root))
    tasks: list[Task] = []
    for level, folder in folders:
        for path in sorted(folder.glob("*.py"), key=_natural_key):
            report.seen += 1
            try:
                task = Task(id=f"kernelbench/level{level}/{path.stem}", source=path.read_text(),
                            tier=LEVEL_TIERS[level], description=f"KernelBench level {level}: {path.stem}")
                task.validate_source()
            except (TaskError, UnicodeDecodeError) as exc:
                if strict:
                    raise TaskError(f"{path}: {exc}") from exc
                report.skip(str(path), str(exc))
                continue
            tasks.append(task)
            report.kept += 1
    return tasks, report


def _natural_key(path: Path) -> tuple:
    """'2_x.py' before '10_y.py', as KernelBench numbers its problems."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name))
