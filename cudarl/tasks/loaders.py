"""Load tasks from a folder of KernelBench files or from JSONL.

Folder: each ``<id>.py`` is a reference; an optional ``<id>.toml`` beside it holds metadata
(``tier``, ``dtype``, ``atol``, ``rtol``, ``description``). JSONL: one object per line with
``id`` and ``source`` plus the same optional keys. Errors name the file and line. Given a
``LoadReport``, a bad file or line is skipped and recorded there (the good ones still load);
without one, the first bad one raises.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from cudarl.files import read_text
from cudarl.tasks.report import LoadReport
from cudarl.tasks.task import Task, TaskError


def _task_from_dict(data: object, where: str) -> Task:
    if not isinstance(data, dict):
        raise TaskError(f"{where}: need a JSON object with id and source, got {type(data).__name__}")
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
            meta = tomllib.loads(_read_text(sidecar))
        except tomllib.TOMLDecodeError as exc:
            raise TaskError(f"{sidecar}: not valid TOML: {exc}") from exc
    meta.setdefault("id", path.stem)
    return _task_from_dict({**meta, "source": _read_text(path)}, str(path))


def _read_text(path: Path) -> str:
    return read_text(path, TaskError)


def select_tasks(tasks: list[Task], only: str | None = None, tier: str | None = None) -> list[Task]:
    """The tasks named in ``only`` (comma-separated ids) and of ``tier``; unknown ids are errors."""
    wanted = set(only.split(",")) if only else None
    if wanted and (unknown := wanted - {t.id for t in tasks}):
        raise TaskError(f"unknown task id(s): {', '.join(sorted(unknown))}")
    return [t for t in tasks if (wanted is None or t.id in wanted) and (tier is None or t.tier == tier)]


def load_tasks(path: Path | str, report: LoadReport | None = None) -> list[Task]:
    """Tasks from a folder, a single ``.py`` file, or a ``.jsonl`` file, sorted by id. With
    ``report``, bad files and lines are skipped and recorded in it instead of raising."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"no such task path: {path}")
    if path.is_dir():
        entries = [(str(file), lambda file=file: load_task_file(file))
                   for file in sorted(path.glob("*.py")) if not file.name.startswith("_")]
    elif path.suffix == ".jsonl":
        entries = [(where, lambda line=line, where=where: _task_from_dict(_json(line, where), where))
                   for number, line in enumerate(_read_text(path).splitlines(), start=1) if line.strip()
                   for where in [f"{path}:{number}"]]
    elif path.suffix == ".py":
        entries = [(str(path), lambda: load_task_file(path))]
    else:
        raise TaskError(f"{path}: expected a folder, a .py file or a .jsonl file")
    tasks: list[Task] = []
    for where, load in entries:
        try:
            tasks.append(load())
        except TaskError as exc:
            if report is None:
                raise
            report.skip(where, str(exc).removeprefix(f"{where}: "))
    if report is not None:
        report.seen, report.kept = report.seen + len(entries), report.kept + len(tasks)
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise TaskError(f"{path}: duplicate task ids: {', '.join(duplicates)}")
    if not tasks:
        skipped = f" ({len(report.skipped)} skipped: {report.skipped[0].where}: {report.skipped[0].reason})" \
            if report is not None and report.skipped else ""
        raise TaskError(f"{path}: no tasks found{skipped}")
    return sorted(tasks, key=lambda t: t.id)


def _json(line: str, where: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{where}: not valid JSON: {exc.msg}") from exc
