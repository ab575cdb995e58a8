"""Batch evaluation: many candidates against their tasks, with a JSON report.

Builds (``Tester.build``) run in parallel threads (each build is its own process group); judges
(``Tester.judge``) go one at a time, so that one candidate's timing never shares the GPU with
another's. The report is written
atomically: a killed run leaves the previous report, never half a file.
"""

from __future__ import annotations

import json
import platform
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from cudarl.files import ReportError, write_text_atomic
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.report import Skipped
from cudarl.tasks.task import Task
from cudarl.tester.tester import Tester
from cudarl.tester.verdict import Verdict

Progress = Callable[[str, Verdict | None], None]


def pair_candidates(tasks: list[Task],
                    candidates: list[Candidate]) -> tuple[list[tuple[Task, Candidate]], list[Candidate]]:
    """Match candidates to tasks by id: the pairs, and the candidates whose task is not there
    (they go into the report's ``unmatched`` list, never silently away)."""
    by_id = {t.id: t for t in tasks}
    pairs = [(by_id[c.task_id], c) for c in candidates if c.task_id in by_id]
    return pairs, [c for c in candidates if c.task_id not in by_id]


def evaluate_all(tester: Tester, pairs: list[tuple[Task, Candidate]], build_workers: int = 2,
                 progress: Progress | None = None) -> list[Verdict]:
    """Judge every pair; ``progress`` is called with a phase name after each step."""
    notify = progress or (lambda _phase, _verdict: None)
    with ThreadPoolExecutor(max_workers=max(1, build_workers)) as pool:
        futures = [pool.submit(tester.build, task, candidate) for task, candidate in pairs]
        built = []
        for future in futures:
            built.append(future.result())
            notify("compile", None)
    verdicts = []
    for (task, candidate), item in zip(pairs, built):
        verdict = tester.judge(task, candidate, item)
        verdicts.append(verdict)
        notify("run", verdict)
    return verdicts


def build_report(tester: Tester, verdicts: list[Verdict], unmatched: list[Candidate] = (),
                 bad_tasks: list[Skipped] = ()) -> dict:
    """The JSON report: the machine, a summary by outcome, every verdict, the candidates that
    were not judged because their task was not loaded, and the task files that failed to load."""
    toolchain = tester.toolchain
    return {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"host": platform.node(), "gpu": tester.has_gpu, "arch": f"sm_{tester.arch}",
                    "compile_mode": tester.mode, "nvcc": toolchain.nvcc_version, "torch": toolchain.torch_version},
        "summary": dict(Counter(v.outcome.value for v in verdicts)),
        "verdicts": [v.model_dump(mode="json") for v in verdicts],
        "unmatched": [{"candidate_id": c.id, "task_id": c.task_id, "reason": "no task with this id was loaded"}
                      for c in unmatched],
        "bad_tasks": [{"where": bad.where, "reason": bad.reason} for bad in bad_tasks],
    }


def write_report(report: dict, path: Path) -> None:
    try:
        write_text_atomic(path, json.dumps(report, indent=2))
    except OSError as exc:
        raise ReportError(f"cannot write the report to {path}: {exc.strerror or exc}") from exc
