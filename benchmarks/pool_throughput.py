"""Candidates judged per hour: the tester pool on Ray against the serial KernelBench-style loop,
side by side on one machine (one GPU, its cores), per candidate format.

    uv run python benchmarks/pool_throughput.py [--inline 32] [--nvrtc 20] [--serial-inline 3] [--serial-nvrtc 5]
                                                [--per-task 4] [--compile-workers 14] [--bench-slots 2]

Candidates are distinct variants of the suite's honest solutions (a comment line differs, so no
cache serves them), ``--per-task`` in a row for each task (as a GRPO group samples several
candidates per prompt), going through the suite's tasks in order. The serial arms judge fewer,
spread evenly through the pool arm's list, so both arms see the same mix of tasks.
- serial, inline: one process, one candidate at a time: stock ``load_inline`` builds it in a fresh
  process (torch's defaults, empty extension folder), then cudarl's judge runs it (``Tester.judge``
  on cudarl's own build of the same source, whose build time is not counted). Per candidate:
  stock build wall + judge wall.
- serial, nvrtc: ``Tester.evaluate`` on each candidate in turn (NVRTC compile, then judge).
- Both serial arms first judge one uncounted candidate (``--no-serial-warm-up`` to count it): the
  tester's first run starts its warm judges, as the pool's start-up does, which is not counted.
- pool: a local Ray with the machine's CPUs and one GPU, ``--compile-workers`` compile workers
  and one bench worker with ``--bench-slots`` slots; all candidates submitted at once, wall time
  from submission to the last verdict. Start-up (workers, precompiled header) is timed apart,
  after one warm-up candidate per format.
The same judge settings (correctness trials, timing budget) apply in every arm.
Prints a table; writes benchmarks/results/pool_throughput-<date>-<gpu>.json (``--out``). ``--only
serial`` / ``--only pool`` measure one arm per run and merge into that file (a run is then shorter).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

# compile_throughput.py sits beside this script, whose folder Python puts first on sys.path.
from compile_throughput import stock_build
from run_metadata import run_metadata

from cudarl.config import CudarlConfig
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Candidate, Tester
from cudarl.tester.verdict import Outcome

ROOT = Path(__file__).resolve().parents[1]


def variants(form: str, count: int, offset: int, per_task: int = 1) -> list[Candidate]:
    base = suite_solutions(form=form)
    picked = [base[(i // per_task) % len(base)] for i in range(count)]
    return [c.model_copy(update={"id": f"{c.id}/v{offset + i}",
                                 "source": c.source + f"\n# pool benchmark variant {offset + i}\n"})
            for i, c in enumerate(picked)]


def same_mix(pool_candidates: list[Candidate], count: int) -> list[Candidate]:
    """``count`` of the pool arm's candidates, evenly spaced through its list: the serial arm
    judges the same mix of tasks (the pool's tasks in the same proportions), not the first task
    over and over, so the two rates are comparable."""
    if count >= len(pool_candidates):
        return list(pool_candidates)
    step = len(pool_candidates) / count
    return [pool_candidates[int(i * step)] for i in range(count)]


def serial_inline(tasks: dict, candidates: list[Candidate], cache: Path, warm_up: Candidate | None) -> dict:
    tester = Tester(CudarlConfig().tester, cache_root=cache)
    if warm_up is not None:  # the judge's first run starts its warm children: not counted, as the pool's start-up
        tester.evaluate(tasks[warm_up.task_id], warm_up)
    rows = []
    for candidate in candidates:
        stock = stock_build(candidate, Path(tempfile.mkdtemp(prefix="stock-", dir=cache)))
        built = tester.build(tasks[candidate.task_id], candidate)  # cudarl's build, not counted
        started = time.perf_counter()
        verdict = tester.judge(tasks[candidate.task_id], candidate, built)
        judge_s = time.perf_counter() - started
        rows.append({"id": candidate.id, "stock_build_s": stock["seconds"], "judge_s": judge_s,
                     "outcome": verdict.outcome.value, "stock_ok": stock["ok"]})
        print(f"  serial inline {candidate.id:36s} stock build {stock['seconds']:6.1f} s  judge {judge_s:5.1f} s  "
              f"{verdict.outcome.value}", flush=True)
    total = sum(r["stock_build_s"] + r["judge_s"] for r in rows)
    return {"candidates": len(rows), "wall_s": total, "per_hour": 3600 * len(rows) / total, "rows": rows,
            "passed": sum(r["outcome"] == "passed" for r in rows)}


def serial_nvrtc(tasks: dict, candidates: list[Candidate], cache: Path, warm_up: Candidate | None) -> dict:
    tester = Tester(CudarlConfig().tester, cache_root=cache)
    if warm_up is not None:
        tester.evaluate(tasks[warm_up.task_id], warm_up)
    started = time.perf_counter()
    verdicts = [tester.evaluate(tasks[c.task_id], c) for c in candidates]
    total = time.perf_counter() - started
    return {"candidates": len(verdicts), "wall_s": total, "per_hour": 3600 * len(verdicts) / total,
            "passed": sum(v.outcome == Outcome.PASSED for v in verdicts)}


def pooled(pool, tasks: dict, candidates: list[Candidate]) -> dict:
    started = time.perf_counter()
    verdicts = pool.judge([(tasks[c.task_id], c) for c in candidates])
    wall = time.perf_counter() - started
    failed = {v.candidate_id: v.reasons[:1] for v in verdicts if v.outcome != Outcome.PASSED}
    return {"candidates": len(verdicts), "wall_s": wall, "per_hour": 3600 * len(verdicts) / wall,
            "passed": len(verdicts) - len(failed), "failed": failed,
            "stage_s_median": stage_medians(verdicts)}


def stage_medians(verdicts: list) -> dict[str, float]:
    """Median seconds per stage over the verdicts (the judge's stages, its waits for GPU turns)."""
    names = {name for v in verdicts for name in v.stage_seconds}
    return {name: round(sorted(v.stage_seconds.get(name, 0.0) for v in verdicts)[len(verdicts) // 2], 3)
            for name in sorted(names)}


def measure_serial(args, tasks: dict, cache: Path, stamp: int, results: dict, save) -> None:
    print("serial baseline (one process, one candidate at a time)", flush=True)
    for form, count, measure in (("inline", args.serial_inline, serial_inline),
                                 ("nvrtc", args.serial_nvrtc, serial_nvrtc)):
        if count == 0:
            continue
        warm_up = variants(form, 1, stamp + 40_000)[0] if args.serial_warm_up else None
        pool_mix = variants(form, getattr(args, form), stamp, args.per_task)
        results[f"serial_{form}"] = measure(tasks, same_mix(pool_mix, count), cache, warm_up)
        save()


def measure_pool(args, tasks: dict, cache: Path, stamp: int, results: dict, save) -> None:
    import ray

    from cudarl.pool import start_pool

    ray.init(num_cpus=os.cpu_count(), num_gpus=1 if results["machine"]["gpu"] else 0, include_dashboard=False,
             logging_level="WARNING")
    config = CudarlConfig.model_validate({
        "tester": {"compile": {"cache_dir": str(cache), "nice": args.compile_nice}},
        "pool": {"min_compile_workers": args.compile_workers, "max_compile_workers": args.compile_workers,
                 "min_bench_workers": 1, "max_bench_workers": 1, "bench_slots": args.bench_slots}})
    started = time.perf_counter()
    pool = start_pool(config)
    pool.judge([(tasks[c.task_id], c)
                for c in variants("inline", 1, stamp + 10_000) + variants("nvrtc", 1, stamp + 10_000)])
    results["pool_startup_s"] = time.perf_counter() - started
    print(f"pool up and warm in {results['pool_startup_s']:.1f} s: {pool.stats()['workers']}", flush=True)
    for form, count, offset in (("inline", args.inline, 20_000), ("nvrtc", args.nvrtc, 30_000)):
        if count == 0:
            continue
        results[f"pool_{form}"] = pooled(pool, tasks, variants(form, count, stamp + offset, args.per_task))
        row = results[f"pool_{form}"]
        print(f"pool {form}: {row['candidates']} candidates ({row['passed']} passed) in {row['wall_s']:.1f} s",
              flush=True)
        results["pool_stats"] = pool.stats()
        save()
    pool.shutdown()
    ray.shutdown()


def print_table(results: dict) -> None:
    print(f"\n{'format':8s} {'arm':8s} {'candidates':>10s} {'passed':>7s} "
          f"{'wall s':>8s} {'per hour':>9s} {'vs serial':>10s}")
    for form in ("inline", "nvrtc"):
        serial, pool_row = results.get(f"serial_{form}"), results.get(f"pool_{form}")
        ratio = pool_row["per_hour"] / serial["per_hour"] if serial and pool_row else None
        if ratio is not None:
            results[f"ratio_{form}"] = ratio
        for arm, row, shown in (("serial", serial, "1.00x"), ("pool", pool_row, f"{ratio:.2f}x" if ratio else "-")):
            if row:
                print(f"{form:8s} {arm:8s} {row['candidates']:10d} {row['passed']:7d} {row['wall_s']:8.1f} "
                      f"{row['per_hour']:9.0f} {shown:>10s}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inline", type=int, default=32)
    parser.add_argument("--nvrtc", type=int, default=20)
    parser.add_argument("--serial-inline", type=int, default=4)
    parser.add_argument("--serial-nvrtc", type=int, default=8)
    parser.add_argument("--serial-warm-up", action=argparse.BooleanOptionalAction, default=True,
                        help="judge one uncounted candidate first in the serial arms "
                             "(the pool's start-up is not counted either)")
    parser.add_argument("--per-task", type=int, default=4, help="candidates per task in a row (a GRPO group)")
    parser.add_argument("--compile-workers", type=int, default=14)
    parser.add_argument("--bench-slots", type=int, default=2)
    parser.add_argument("--compile-nice", type=int, default=CudarlConfig().tester.compile.nice,
                        help="CPU priority of the pool's builds (compile.nice); 0: builds compete with judges")
    parser.add_argument("--only", choices=("serial", "pool"), default=None,
                        help="measure one arm; the other is read from --out when it is there")
    parser.add_argument("--cache", default=None, help="cache folder (default: a fresh temporary one)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    args = parser.parse_args()

    import torch

    tasks = {t.id: t for t in load_suite()}
    cache = Path(args.cache or tempfile.mkdtemp(prefix="pool-bench-"))
    cache.mkdir(parents=True, exist_ok=True)
    stamp = int(time.time())
    gpu_name = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"pool_throughput-{datetime.now(UTC).date().isoformat()}-{(gpu_name or 'cpu').replace(' ', '-')}.json")
    results: dict = json.loads(out.read_text()) if args.only and out.exists() else {}
    results.update({"date": datetime.now(UTC).date().isoformat(), "machine": run_metadata(args.commit)})
    results.setdefault("args", {})[args.only or "all"] = vars(args)

    def save() -> None:  # after every arm, so a run cut short keeps what it measured
        out.write_text(json.dumps(results, indent=2))

    if args.only in (None, "serial"):
        measure_serial(args, tasks, cache, stamp, results, save)
    if args.only in (None, "pool"):
        measure_pool(args, tasks, cache, stamp, results, save)
    print_table(results)
    save()
    print(f"written {out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
