"""Per-stage latency of the tester on the honest example kernels, and the spread of repeated
timings. Run on a GPU machine:

    uv run python benchmarks/tester_stages.py [--repeats 5] [--out-dir benchmarks/results]

Cold builds use a fresh cache and run in parallel (as a GRPO group's would); a second build of
the same sources measures the cache hit. Then each candidate runs once (load, correctness,
timing stage wall times from the child), and a few run ``--repeats`` times to show how far
independent measurements of the same kernel drift apart. Prints a table; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from cudarl.config import CudarlConfig
from cudarl.tasks import load_tasks
from cudarl.tester import Candidate, Tester

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "cudarl" / "tasks" / "suite"
IDS = ("vector_add", "relu", "row_sum", "softmax", "layer_norm", "matmul")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--repeat-tasks", default="vector_add,softmax,matmul")
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--build-workers", type=int, default=6)
    args = parser.parse_args()

    tasks = {t.id: t for t in load_tasks(SUITE)}
    candidates = [Candidate(task_id=i, id=i, source=(SUITE / "solutions" / f"{i}.py").read_text()) for i in IDS]
    cache = Path(tempfile.mkdtemp(prefix="cudarl-bench-"))
    base = CudarlConfig().tester
    config = base.model_copy(update={"compile": base.compile.model_copy(update={"mode": "extension"})})
    tester = Tester(config, cache_root=cache)
    if not tester.has_gpu:
        print("no GPU: this benchmark needs one", file=sys.stderr)
        return 2

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.build_workers) as pool:
        builds = list(pool.map(lambda c: tester.build(tasks[c.task_id], c), candidates))
    cold_wall = time.monotonic() - started
    rows = {}
    for candidate, built in zip(candidates, builds):
        task = tasks[candidate.task_id]
        hit_start = time.monotonic()
        tester.build(task, Candidate(task_id=task.id, id="again", source=candidate.source))
        hit_s = time.monotonic() - hit_start
        verdict = tester.judge(task, candidate, built)
        seconds = verdict.stage_seconds
        rows[task.id] = {
            "outcome": verdict.outcome.value,
            "compile_cold_s": verdict.compile.seconds if verdict.compile else None,
            "compile_cached_s": hit_s,
            "load_s": seconds.get("load"), "correctness_s": seconds.get("correctness"),
            "timing_s": seconds.get("timing"), "run_wall_s": seconds.get("run"),
            "candidate_ms": verdict.timing.candidate.median_ms if verdict.timing else None,
            "reference_ms": verdict.timing.reference.median_ms if verdict.timing else None,
            "speedup": verdict.timing.speedup if verdict.timing else None,
            "reasons": verdict.reasons[:1],
        }

    spreads = {}
    for task_id in [t for t in args.repeat_tasks.split(",") if t in tasks]:
        source = next(c.source for c in candidates if c.task_id == task_id)
        medians, ref_medians = [], []
        for _ in range(args.repeats):
            verdict = tester.evaluate(tasks[task_id], Candidate(task_id=task_id, id=task_id, source=source))
            if verdict.timing:
                medians.append(verdict.timing.candidate.median_ms)
                ref_medians.append(verdict.timing.reference.median_ms)
        if medians:
            spreads[task_id] = {"candidate_medians_ms": medians, "reference_medians_ms": ref_medians,
                                "candidate_spread": (max(medians) - min(medians)) / min(medians),
                                "reference_spread": (max(ref_medians) - min(ref_medians)) / min(ref_medians)}

    import torch

    machine = {"host": platform.node(), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "nvcc": tester.toolchain.nvcc_version, "python": platform.python_version(),
               "cpus": __import__("os").cpu_count()}
    header = f"{'task':<11} {'outcome':<8} {'cold s':>7} {'hit s':>6} {'load s':>7} {'check s':>8} {'time s':>7} " \
             f"{'cand ms':>9} {'ref ms':>9} {'speedup':>8}"
    print(f"\nmachine: {machine}\ncold builds: {len(builds)} in parallel ({args.build_workers} workers), "
          f"{cold_wall:.1f} s wall\n{header}")

    def fmt(value, spec):
        return format(value, spec) if isinstance(value, (int, float)) else "-"

    for task_id, row in rows.items():
        print(f"{task_id:<11} {row['outcome']:<8} {fmt(row['compile_cold_s'], '7.1f')} "
              f"{fmt(row['compile_cached_s'], '6.3f')} {fmt(row['load_s'], '7.2f')} "
              f"{fmt(row['correctness_s'], '8.2f')} "
              f"{fmt(row['timing_s'], '7.2f')} {fmt(row['candidate_ms'], '9.4f')} {fmt(row['reference_ms'], '9.4f')} "
              f"{fmt(row['speedup'], '8.2f')}")
    print(f"\nrepeated timing ({args.repeats} fresh processes each):")
    for task_id, spread in spreads.items():
        print(f"{task_id:<11} candidate median {statistics.median(spread['candidate_medians_ms']):.4f} ms, "
              f"spread {spread['candidate_spread']:.2%}; reference spread {spread['reference_spread']:.2%}")

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    out = out_dir / f"tester_stages-{stamp}-{torch.cuda.get_device_name(0).replace(' ', '_')}.json"
    out.write_text(json.dumps({"date": stamp, "machine": machine, "cold_build_wall_s": cold_wall,
                               "build_workers": args.build_workers, "stages": rows, "repeat_spread": spreads},
                              indent=2))
    print(f"\nwrote {out}")
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
