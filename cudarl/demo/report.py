"""The demo's report folder: the steps as JSON, PNG plots of the curves, and the best kernel of
each task with its verdict; and the short table printed at the end.

Why a judge that records: the step log keeps statistics, not candidates; the demo wraps the
pool's judge (``RecordingJudge``) to keep every judged candidate with its verdict and step.

Covered: recording, choosing the best kernels, the plots, the table rows, writing. Not covered:
running the phases (``cudarl.demo.run``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudarl.tester.verdict import Outcome

CORRECT = {Outcome.PASSED, Outcome.CORRECT}


@dataclass(frozen=True)
class Judged:
    """One judged candidate."""

    step: int
    task_id: str
    source: str
    verdict: dict  # the verdict as JSON (``Verdict.model_dump(mode="json")``)


class RecordingJudge:
    """The pool's judge, keeping every (candidate, verdict) with the step it was judged in."""

    def __init__(self, judge: Callable) -> None:
        self._judge, self._lock = judge, threading.Lock()
        self.step = 0
        self.judged: list[Judged] = []

    def __call__(self, pairs):
        verdicts = self._judge(pairs)
        with self._lock:
            for (task, candidate), verdict in zip(pairs, verdicts):
                self.judged.append(Judged(self.step, task.id, candidate.source, verdict.model_dump(mode="json")))
        return verdicts


def _rank(judged: Judged) -> tuple:
    """Better first: correct and fast, then correct, then built, then anything; later steps break ties."""
    verdict = judged.verdict
    outcome = Outcome(verdict["outcome"])
    speedup = (verdict.get("timing") or {}).get("speedup") or 0.0
    built = outcome in CORRECT or outcome == Outcome.COMPILED
    return (outcome in CORRECT, speedup, built, judged.step)


def best_kernels(judged: Sequence[Judged]) -> dict[str, Judged]:
    """Per task, its best judged candidate (``_rank``)."""
    best: dict[str, Judged] = {}
    for item in judged:
        if item.task_id not in best or _rank(item) > _rank(best[item.task_id]):
            best[item.task_id] = item
    return best


def step_rows(records: Sequence[dict]) -> list[dict]:
    """Per step (a ``steps.jsonl`` line): reward, compile and pass rates, best speedup, seconds."""
    rows = []
    for record in records:
        stats = record["stats"]
        speedups = [s for s in stats.get("best_speedups", []) if s]
        rows.append({"step": record["step"] + 1, "tier": record["tier"], "reward": stats["mean_reward"],
                     "compile_rate": stats["compile_rate"], "pass_rate": stats["pass_rate"],
                     "best_speedup": max(speedups) if speedups else None, "seconds": record["seconds"]["step"],
                     "weights_version": record["weights_version"]})
    return rows


def plot_curves(rows: Sequence[dict], folder: Path) -> list[Path]:
    """``reward.png``, ``rates.png`` (pass and compile) and ``speedup.png`` over the steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = [row["step"] for row in rows]
    plots = {"reward.png": ("mean reward", [("reward", "reward")]),
             "rates.png": ("share of turns", [("compile_rate", "compiled"), ("pass_rate", "passed")]),
             "speedup.png": ("best speedup (correct kernels)", [("best_speedup", "best speedup")])}
    written = []
    for name, (label, series) in plots.items():
        figure, axes = plt.subplots(figsize=(5, 3.2), dpi=100)
        for key, legend in series:
            points = [(s, row[key]) for s, row in zip(steps, rows) if row[key] is not None]
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=legend)
        axes.set_xlabel("RL step")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel(label)
        if len(series) > 1:
            axes.legend()
        if not any(row[key] is not None for key, _ in series for row in rows):
            axes.text(0.5, 0.5, "no correct kernel timed\n(no GPU, or none passed)", ha="center", va="center",
                      transform=axes.transAxes)
        figure.tight_layout()
        figure.savefig(folder / name)
        plt.close(figure)
        written.append(folder / name)
    return written


def machine() -> dict:
    """What produced the report: cudarl's commit (where it runs from a checkout) and version, Python, torch and
    its CUDA, the GPU, the CPU count; figures from two reports compare only where these agree."""
    import os
    import platform
    import subprocess

    import torch

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("cudarl")
    except PackageNotFoundError:
        package = None
    return {"commit": commit, "cudarl": package, "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "cpus": os.cpu_count()}


def write_report(folder: Path, summary: dict, rows: Sequence[dict], judged: Sequence[Judged]) -> dict[str, Judged]:
    """``summary.json`` (settings, the machine, steps, best kernels' verdicts), ``steps.json``, the plots and
    ``kernels/<task>.py`` with ``kernels/<task>.json``; the best kernels. The JSON first: a plot
    that fails loses nothing else."""
    folder.mkdir(parents=True, exist_ok=True)
    best = best_kernels(judged)
    summary = summary | {"machine": machine(), "steps": list(rows), "best_kernels": {
        task: {"step": item.step + 1, "outcome": item.verdict["outcome"], "file": f"kernels/{task}.py"}
        for task, item in sorted(best.items())}}
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "steps.json").write_text(json.dumps(list(rows), indent=2) + "\n")
    kernels = folder / "kernels"
    kernels.mkdir(exist_ok=True)
    for task, item in best.items():
        (kernels / f"{task}.py").write_text(item.source)
        (kernels / f"{task}.json").write_text(json.dumps({"step": item.step + 1, **item.verdict}, indent=2) + "\n")
    if rows:
        plot_curves(rows, folder)
    return best
