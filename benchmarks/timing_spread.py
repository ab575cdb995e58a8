"""Cross-process timing spread through the tester itself: does the same kernel get the same time
from one judge process to the next? Run on a GPU machine:

    uv run python benchmarks/timing_spread.py [--tasks vector_add softmax matmul layer_norm] [--repeats 6]

Each repeat is a full ``Tester.evaluate`` of the task's honest suite solution with default
settings: a fresh judge and runner process, its own warm-up, L2 flushes and fresh inputs, and
(``timing.reference_reuse_s = 0``) a fresh reference timing in a process of its own. The default
tasks' kernels take 0.1 to 1 ms, above the 50 us the measurement is meant for. The spread is
(max - min) / median of the per-process medians; the goal is within 3%. Prints a table; writes
``benchmarks/results/timing_spread-<date>-<gpu>.json`` with the commit, versions and settings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from run_metadata import ROOT, run_metadata

from cudarl.config import CudarlConfig
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Outcome, Tester


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["vector_add", "softmax", "matmul", "layer_norm"])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    config = CudarlConfig().tester.with_changes({"timing.reference_reuse_s": 0.0})
    tester = Tester(config, cache_root=Path(tempfile.mkdtemp(prefix="timing-spread-")))
    tasks = {t.id: t for t in load_suite()}
    solutions = {s.task_id: s for s in suite_solutions(set(args.tasks))}
    rows = []
    for task_id in args.tasks:
        candidate, task = solutions[task_id], tasks[task_id]
        tester.build(task, candidate)
        medians, references = [], []
        for repeat in range(args.repeats):
            verdict = tester.evaluate(task, candidate)
            if verdict.outcome != Outcome.PASSED:
                print(f"  {task_id} repeat {repeat}: {verdict.outcome.value} {verdict.reasons[:1]}", flush=True)
                continue
            medians.append(verdict.timing.candidate.median_ms)
            references.append(verdict.timing.reference.median_ms)
            print(f"  {task_id} repeat {repeat}: candidate {medians[-1]:.4f} ms, reference {references[-1]:.4f} ms",
                  flush=True)
        rows.append({"task": task_id, "candidate_medians_ms": medians, "reference_medians_ms": references,
                     "candidate_spread": spread(medians), "reference_spread": spread(references)})

    print(f"\n{'task':14s} {'runs':>4s} {'cand median ms':>15s} {'cand spread':>12s} "
          f"{'ref median ms':>14s} {'ref spread':>11s}")
    for row in rows:
        cand, ref = row["candidate_medians_ms"], row["reference_medians_ms"]
        print(f"{row['task']:14s} {len(cand):4d} {statistics.median(cand) if cand else float('nan'):15.4f} "
              f"{row['candidate_spread']:12.2%} {statistics.median(ref) if ref else float('nan'):14.4f} "
              f"{row['reference_spread']:11.2%}")
    metadata = run_metadata(args.commit)
    gpu = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"timing_spread-{datetime.now(UTC).date().isoformat()}-{gpu}.json")
    settings = {"repeats": args.repeats, "timing": config.timing.model_dump()}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
