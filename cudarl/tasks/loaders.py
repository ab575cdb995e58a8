"""Load tasks from a folder of KernelBench files or from JSONL.

Folder: each ``<id>.py`` is a reference; an optional ``<id>.toml`` beside it holds metadata
(``tier``, ``dtype``, ``atol``, ``rtol``, ``description``). JSONL: one object per line with
``id`` and ``source`` plus the same optional keys. Errors name the file and line.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from cudarl.tasks.task import Task, TaskError


def _task_from_dict(data: dict, where: str) -> Task:
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise TaskError(f"{where}: {problems}") from exc
    task.validate_source()
    return task


def load_task_file(path: Path) -> Task:
    """One reference file plus its optional TOML sidecar."""
    meta: dict = {}
    sidecar = path.with_suffix(".toml")
    if sidecar.exists():
        try:
            meta = tomllib.loads(sidecar.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise TaskError(f"{sidecar}: not valid TOML: {exc}") from exc
    meta.setdefault("id", path.stem)
    return _task_from_dict({**meta, "source": path.read_text()}, str(path))


def select_tasks(tasks: list[Task], only: str | None = None, tier: str | None = None) -> list[Task]:
    """The tasks named in ``only`` (comma-separated ids) and of ``tier``; unknown ids are errors."""
    wanted = set(only.split(",")) if only else None
    if wanted and (unknown := wanted - {t.id for t in tasks}):
        raise TaskError(f"unknown task id(s): {', '.join(sorted(unknown))}")
    return [t for t in tasks if (wanted is None or t.id in wanted) and (tier is None or t.tier == tier)]


def load_tasks(path: Path | str) -> list[Task]:
    """Tasks from a folder, a single ``.py`` file, or a ``.jsonl`` file, sorted by id."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"no such task path: {path}")
    if path.is_dir():
        tasks = [load_task_file(p) for p in sorted(path.glob("*.py")) if not p.name.startswith("_")]
    elif path.suffix == ".jsonl":
        tasks = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskError(f"{path}:{number}: not valid JSON: {exc.msg}") from exc
            tasks.append(_task_from_dict(data, f"{path}:{number}"))
    elif path.suffix == ".py":
        tasks = [load_task_file(path)]
    else:
        raise TaskError(f"{path}: expected a folder, a .py file or a .jsonl file")
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise TaskError(f"{path}: duplicate task ids: {', '.join(duplicates)}")
    if not tasks:
        raise TaskError(f"{path}: no tasks found")
    return sorted(tasks, key=lambda t: t.id)
