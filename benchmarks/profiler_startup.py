"""What the own-kernel check's profiled forward costs in a fresh process, by profiler setting.

The tester's runner is a fresh process per candidate, so the profiler's one-time start-up
(CUPTI and Kineto initialisation) is paid on every evaluation. Each variant below runs in its
own fresh process: CUDA is initialised first (not counted), then a small forward (a matmul and
a softmax) is profiled twice; the table shows the first and the second profiled call, and the
cost of an optional warm-up step done before them. Then (``--contention-rounds``) whether a
runner warming up in another process disturbs a timing measurement made meanwhile.

    uv run python benchmarks/profiler_startup.py [--repeats 3]

Writes benchmarks/results/profiler_startup-<date>-<gpu>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = r"""
import json, sys, time
import torch
from torch.profiler import ProfilerActivity, profile

variant = sys.argv[1]
x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
activities = [ProfilerActivity.CUDA] if "cuda-only" in variant else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
result = {"variant": variant}
started = time.perf_counter()
if "prepared" in variant:
    warm = profile(activities=activities)
    warm.prepare_trace()  # CUPTI/Kineto set up, nothing recorded
    result["warmup_s"] = time.perf_counter() - started
    warm.start_trace()
    torch.cuda.synchronize()
    warm.stop_trace()
    result["warmup_s"] = time.perf_counter() - started
for label in ("first_s", "second_s"):
    started = time.perf_counter()
    with profile(activities=activities) as prof:
        y = torch.softmax(x @ x, dim=-1)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]
    result[label] = time.perf_counter() - started
    result["kernels"] = len(kernels)
print(json.dumps(result))
"""

VARIANTS = ("cpu+cuda", "cuda-only", "cpu+cuda prepared", "cuda-only prepared")

_WARMER = r"""
import sys, torch
from cudarl.tester.judging.hardening import warm_profiler
print("imported", flush=True)
warm_profiler(torch.device("cuda"))
"""


def contention(rounds: int) -> list[dict]:
    """Does a runner starting CUDA and the profiler disturb the judge timing its reference?

    Times two kernels here (cudarl's timing, default settings), alternately alone and while a
    fresh process starts CUDA and the profiler (``warm_profiler``, as the runner does), begun
    right as the measurement starts. Reports the median of each condition."""
    import torch

    from cudarl.config import TimingConfig
    from cudarl.tester.judging import timing

    device = torch.device("cuda")
    flush = timing.l2_flush_buffer(device)
    a, b = torch.randn(4096, 4096, device=device), torch.randn(4096, 4096, device=device)
    x, y = torch.randn(1 << 24, device=device), torch.randn(1 << 24, device=device)
    kernels = {"matmul 4096": lambda _k: a @ b, "add 16M": lambda _k: x + y}
    rows = []
    for name, call in kernels.items():
        medians: dict[str, list[float]] = {"alone": [], "while warming": []}
        for _ in range(rounds):
            for condition, values in medians.items():
                child = None
                if condition == "while warming":
                    child = subprocess.Popen([sys.executable, "-c", _WARMER], stdout=subprocess.PIPE, text=True,
                                             cwd=ROOT)
                    if child.stdout.readline().strip() != "imported":
                        raise RuntimeError("the warming process failed to start (see its error above)")
                stats = timing.time_callable(call, flush, TimingConfig())
                values.append(stats.median_ms)
                if child is not None and child.wait(timeout=120) != 0:
                    raise RuntimeError("the warming process failed (see its error above)")
        row = {"kernel": name, **{k: statistics.median(v) for k, v in medians.items()}, "runs": medians}
        row["change"] = row["while warming"] / row["alone"] - 1.0
        rows.append(row)
        print(f"{name:14s} alone {row['alone']:.4f} ms   while a runner warms up {row['while warming']:.4f} ms   "
              f"{row['change']:+.2%}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contention-rounds", type=int, default=5,
                        help="alternations of the timing-contention check (0: skip it)")
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no GPU: this benchmark needs one", file=sys.stderr)
        return 2
    rows = []
    print(f"{'variant':22s} {'warm-up s':>10s} {'first s':>8s} {'second s':>9s} {'kernels':>8s}")
    for variant in VARIANTS:
        runs = []
        for _ in range(args.repeats):
            done = subprocess.run([sys.executable, "-c", _PROBE, variant], capture_output=True, text=True, timeout=300,
                                  check=False)
            if done.returncode != 0:
                print(f"{variant}: failed: {done.stderr[-500:]}")
                break
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if not runs:
            continue
        row = {"variant": variant, "runs": runs}
        for key in ("warmup_s", "first_s", "second_s"):
            row[key] = statistics.median(r.get(key, 0.0) for r in runs)
        rows.append(row)
        print(f"{variant:22s} {row['warmup_s']:10.3f} {row['first_s']:8.3f} {row['second_s']:9.3f} "
              f"{runs[-1]['kernels']:8d}", flush=True)
    contended = contention(args.contention_rounds) if args.contention_rounds else []
    gpu = torch.cuda.get_device_name().replace(" ", "-")
    out = Path(args.out_dir) / f"profiler_startup-{datetime.now(UTC):%Y-%m-%d}-{gpu}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"created": datetime.now(UTC).isoformat(timespec="seconds"), "gpu": gpu,
                               "torch": torch.__version__, "rows": rows,
                               "contention": contended}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
