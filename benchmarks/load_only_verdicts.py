"""Compile-only verdicts on a machine without a GPU, with load-only judges (the default: the judge
never imports torch, the runner builds the reference first) against judges that build the
reference themselves (``tester.sandbox.load_only_judges = false``), side by side in one run:

    uv run python benchmarks/load_only_verdicts.py [--rounds 1] [--judge-workers 2]

The kernel-choice grid (``cudarl.rl.kernel_choices``: 27 candidates over three tasks) is built
once into one cache; each round then judges the whole grid under both settings, in alternating
order, ``--judge-workers`` judges at a time, every pair judged afresh (no reuse). Only the judge
stage differs between the arms (the builds are cache hits for both). Prints a table; writes JSON
under ``benchmarks/results``. Not covered: a GPU machine (there every judge imports torch: it
runs the correctness trials and the timing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from run_metadata import ROOT, run_metadata

from cudarl.config import CudarlConfig
from cudarl.rl.kernel_choices import TASKS, render_all
from cudarl.rl.local_judge import LocalJudge
from cudarl.tasks.builtin import load_suite
from cudarl.tester import Tester

ARMS = {"load-only judges": True, "judges build the reference": False}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--judge-workers", type=int, default=2)
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--commit", default=None, help="the commit, where the tree has no git history")
    args = parser.parse_args()
    if args.rounds < 1 or args.judge_workers < 1:
        parser.error("--rounds and --judge-workers must be at least 1")
    tasks = {t.id: t for t in load_suite() if t.id in TASKS}
    pairs = [(tasks[c.task_id], c) for c in render_all()]
    cache = Path(tempfile.mkdtemp(prefix="cudarl-load-only-"))
    testers = {}
    for arm, load_only in ARMS.items():
        config = CudarlConfig().tester.with_changes({"sandbox.load_only_judges": load_only})
        testers[arm] = Tester(config, cache_root=cache)
    first = next(iter(testers.values()))
    if first.has_gpu:
        print("a GPU is here: judges import torch whatever the setting; run this on a machine without one",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    for task, candidate in pairs:  # the builds, once, for both arms
        first.build(task, candidate)
    print(f"built {len(pairs)} candidates in {time.monotonic() - started:.0f} s", flush=True)
    rows: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    for number in range(args.rounds):
        order = list(ARMS) if number % 2 == 0 else list(reversed(ARMS))
        for arm in order:
            judge = LocalJudge(testers[arm], judge_workers=args.judge_workers, reuse=False)
            started = time.monotonic()
            verdicts = judge(pairs)
            seconds = time.monotonic() - started
            outcomes = Counter(v.outcome.value for v in verdicts)
            rows[arm].append({"round": number, "seconds": seconds, "outcomes": dict(outcomes)})
            print(f"round {number}: {arm}: {seconds:.1f} s, {dict(outcomes)}", flush=True)
    summary = {arm: {"median_s": statistics.median(r["seconds"] for r in runs),
                     "verdicts_per_minute": 60 * len(pairs) / statistics.median(r["seconds"] for r in runs)}
               for arm, runs in rows.items()}
    baseline = summary["judges build the reference"]["median_s"]
    print(f"\n{'arm':<30} {'verdicts':>8} {'median s':>9} {'verdicts/min':>13} {'vs judges with torch':>21}")
    for arm, figures in summary.items():
        print(f"{arm:<30} {len(pairs):>8} {figures['median_s']:>9.1f} {figures['verdicts_per_minute']:>13.1f} "
              f"{baseline / figures['median_s']:>20.2f}x")
    result = {"benchmark": "load_only_verdicts", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": run_metadata(args.commit), "settings": {"rounds": args.rounds,
                                                                  "judge_workers": args.judge_workers,
                                                                  "candidates": len(pairs)},
              "rounds": rows, "summary": summary}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"load_only_verdicts-{datetime.now(UTC):%Y-%m-%d}-cpu{result['machine']['cpus']}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
