"""The built-in suite: tasks written by this project (``suite/<id>.py`` + ``<id>.toml``) and
honest reference solutions for some of them (``suite/solutions/<id>.py``).

The solutions are trusted: they seed the warm start, test the tester, and show what a good
kernel looks like. Their GPU measurements are recorded back into each task's TOML (a
``[measured]`` table) by ``cudarl tasks check --record``.
"""

from __future__ import annotations

import re
from pathlib import Path

from cudarl.files import write_text_atomic
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.loaders import load_tasks
from cudarl.tasks.task import Measured, Task

SUITE_DIR = Path(__file__).resolve().parent / "suite"
SOLUTIONS_DIR = SUITE_DIR / "solutions"
NVRTC_SOLUTIONS_DIR = SUITE_DIR / "solutions_nvrtc"


def load_suite() -> list[Task]:
    return load_tasks(SUITE_DIR)


def suite_solutions(task_ids: set[str] | None = None, form: str = "inline") -> list[Candidate]:
    """The suite's honest solutions as candidates: ``inline`` (every task, id ``<task>/solution``)
    or ``nvrtc`` (the tasks re-written in the nvrtc format, id ``<task>/solution-nvrtc``)."""
    folder, suffix = (SOLUTIONS_DIR, "") if form == "inline" else (NVRTC_SOLUTIONS_DIR, "-nvrtc")
    return [
        Candidate(task_id=path.stem, id=f"{path.stem}/solution{suffix}", source=path.read_text())
        for path in sorted(folder.glob("*.py"))
        if task_ids is None or path.stem in task_ids
    ]


def record_measurement(task_id: str, measured: Measured, suite_dir: Path = SUITE_DIR) -> None:
    """Write (or replace) the ``[measured]`` table of one task's TOML, atomically."""
    path = suite_dir / f"{task_id}.toml"
    text = path.read_text() if path.exists() else ""
    text = re.sub(r"\n*\[measured\][^\[]*", "", text).rstrip() + "\n"
    text += (f"\n[measured]  # the suite's solution on a GPU (cudarl tasks check --record)\n"
             f"speedup = {measured.speedup:.3f}\nsolution_ms = {measured.solution_ms:.4f}\n"
             f"reference_ms = {measured.reference_ms:.4f}\ndevice = \"{measured.device}\"\n"
             f"date = \"{measured.date}\"\n")
    write_text_atomic(path, text)
