"""Candidates judged per hour by the tester pool with 1, 2 (, 4) bench GPUs, side by side in one
run on a machine with several GPUs:

    uv run python benchmarks/bench_scaling.py [--gpus 1,2] [--candidates 64] [--compile-workers 14]

Each arm starts a local Ray that sees ``N`` GPUs, a pool with one bench worker per GPU
(``pool.gpus_per_bench_worker = 1``, ``--bench-slots`` each) and ``--compile-workers`` compile
workers, warms it (one uncounted candidate per worker, not timed, as in
``pool_throughput.py``), then submits ``--candidates`` distinct variants of the suite's honest
nvrtc solutions at once (a comment differs, so no cache serves them; each arm gets its own
variants) and times them to the last verdict. NVRTC builds take well under a second, so the bench
workers, not the compilers, bound the rate; the ideal is N times one GPU's.
Prints a table; writes ``benchmarks/results/bench_scaling-<date>-<gpu>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pool_throughput import pooled, variants
from run_metadata import ROOT, run_metadata

from cudarl.config import CudarlConfig
from cudarl.tasks.builtin import load_suite


def measure(gpus: int, args, tasks: dict, cache: Path, offset: int) -> dict:
    """One arm: a local Ray with ``gpus`` GPUs and a bench worker on each."""
    import ray

    from cudarl.pool import start_pool

    ray.init(address="local", num_cpus=os.cpu_count(), num_gpus=gpus, include_dashboard=False,
             logging_level="WARNING")
    try:
        config = CudarlConfig.model_validate({
            "tester": {"compile": {"cache_dir": str(cache)}},
            "pool": {"min_compile_workers": args.compile_workers, "max_compile_workers": args.compile_workers,
                     "min_bench_workers": gpus, "max_bench_workers": gpus, "gpus_per_bench_worker": 1.0,
                     "bench_slots": args.bench_slots}})
        started = time.perf_counter()
        pool = start_pool(config)
        pool.judge([(tasks[c.task_id], c) for c in variants("nvrtc", gpus * args.bench_slots, offset + 90_000)])
        startup = time.perf_counter() - started
        row = pooled(pool, tasks, variants("nvrtc", args.candidates, offset, args.per_task))
        row |= {"gpus": gpus, "startup_s": startup, "workers": pool.stats()["workers"]}
        pool.shutdown()
        return row
    finally:
        ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="1,2", help="bench GPU counts (more than the machine has: left out)")
    parser.add_argument("--candidates", type=int, default=64)
    parser.add_argument("--per-task", type=int, default=4, help="candidates per task in a row (a GRPO group)")
    parser.add_argument("--compile-workers", type=int, default=14)
    parser.add_argument("--bench-slots", type=int, default=2)
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch

    available = torch.cuda.device_count()
    wanted = [int(n) for n in args.gpus.split(",")]
    counts = [n for n in wanted if n <= available]
    if not counts:
        print(f"no arm fits: this machine has {available} GPU(s); wanted {wanted}")
        return 2
    tasks = {t.id: t for t in load_suite()}
    stamp = int(time.time())
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as cache:
        for index, gpus in enumerate(counts):
            print(f"{gpus} bench GPU(s): judging {args.candidates} candidates", flush=True)
            rows.append(measure(gpus, args, tasks, Path(cache), stamp + 100_000 * (index + 1)))
    base = rows[0]["per_hour"] if rows[0]["gpus"] == 1 else None
    print(f"\n{'GPUs':>4} {'candidates':>10} {'passed':>7} {'wall s':>8} {'per hour':>9} {'scaling':>8}")
    for row in rows:
        row["scaling"] = row["per_hour"] / base if base else None
        print(f"{row['gpus']:>4} {row['candidates']:>10} {row['passed']:>7} {row['wall_s']:>8.1f} "
              f"{row['per_hour']:>9.0f} {(row['scaling'] or 0):>7.2f}x")
    metadata = run_metadata(args.commit)
    name = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"bench_scaling-{datetime.now(UTC).date().isoformat()}-{name}.json")
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "commit")} | {
        "gpus_compared": counts, "skipped": [n for n in wanted if n not in counts], "format": "nvrtc"}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
