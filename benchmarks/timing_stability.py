"""How stable are timings across fresh processes, and what moves them? Run on a GPU machine:

    uv run python benchmarks/timing_stability.py [--processes 5]

Each fresh process times torch.add on 2^26 floats (memory-bound) and a 2048^3 fp32 matmul
(compute-bound) with the tester's timing function at several warm-up lengths, and with a variant
that records the end event without the device-wide synchronize, reading the SM clock before and
after. Prints a table of medians per process and the spread across processes; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child() -> None:
    import torch

    from cudarl.config import TimingConfig
    from cudarl.tester.judging.timing import l2_flush_buffer, time_callable

    def clock() -> int:
        try:
            return int(torch.cuda.clock_rate())
        except Exception:  # noqa: BLE001 - NVML may be unavailable
            return -1

    a, b = torch.randn(1 << 26, device="cuda"), torch.randn(1 << 26, device="cuda")
    x, y = torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")
    flush = l2_flush_buffer(torch.device("cuda"))
    result = {}
    for name, call in [("add", lambda: a + b), ("matmul", lambda: x @ y)]:
        for warmup in (0.3, 1.0, 3.0):
            before = clock()
            stats = time_callable(call, flush, TimingConfig(warmup_s=warmup, budget_s=2.0))
            result[f"{name} warm {warmup}s"] = {"median": stats.median_ms, "clock_before": before,
                                                "clock_after": clock(), "count": stats.count}
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(200):
            flush.fill_(1)
            torch.cuda.synchronize()
            start.record()
            call()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        samples.sort()
        result[f"{name} no host sync"] = {"median": samples[len(samples) // 2], "clock_before": -1,
                                          "clock_after": clock(), "count": 200}
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child()
        return 0
    runs = []
    for _ in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'method':<22} " + " ".join(f"{'p' + str(i):>8}" for i in range(len(runs))) + f" {'spread':>8}  clocks")
    summary = {}
    for key in runs[0]:
        medians = [r[key]["median"] for r in runs]
        spread = (max(medians) - min(medians)) / min(medians)
        summary[key] = {"medians_ms": medians, "spread": spread,
                        "clocks": [(r[key]["clock_before"], r[key]["clock_after"]) for r in runs]}
        clocks = ",".join(str(r[key]["clock_after"]) for r in runs)
        print(f"{key:<22} " + " ".join(f"{m:8.4f}" for m in medians) + f" {spread:8.2%}  {clocks}")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    path = out_dir / f"timing_stability-{stamp}.json"
    path.write_text(json.dumps({"date": stamp, "processes": args.processes, "summary": summary}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
