"""Compile latency and throughput: stock ``load_inline``, cudarl's inline path and the nvrtc
path, side by side on one machine.

    uv run python benchmarks/compile_throughput.py [--tasks vector_add,relu,softmax] [--workers 16]

1. Latency, fresh caches, one build at a time, for each task of ``--tasks``:
   - stock: a fresh process imports the suite's inline solution with plain ``load_inline``
     (torch's defaults: its own extension folder, set to an empty one; its own architecture
     choice; its own job count);
   - cudarl inline: ``Tester.build`` on the same solution (sandboxed compile child, one
     architecture, the lighter torch header, the machine's precompiled header), and again
     (cache hit);
   - nvrtc, where the task has an nvrtc solution: ``Tester.build`` on it, and again (hit);
   - one broken candidate (the first task's solution with an undefined name in a kernel), stock
     and cudarl: cudarl builds a broken candidate twice (see ``cudarl.tester.build.inline_fast``).
   Each figure is the wall time of the whole build as the caller sees it, process start and
   imports included. The precompiled header's one-time set-up is timed on its own.
2. Throughput: distinct variants (one comment line differs, so nothing is cached) of the
   ``--throughput-tasks`` solutions built by ``--workers`` concurrent builders; candidates per
   minute, per format. It runs first (its precompiled-header set-up then serves the latency
   part too).

Prints tables; writes benchmarks/results/compile_throughput-<date>-<machine>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from cudarl import env
from cudarl.config import CudarlConfig
from cudarl.tasks.builtin import load_suite, suite_solutions
from cudarl.tester import Candidate, Tester

ROOT = Path(__file__).resolve().parents[1]

_STOCK = r"""
import importlib.util, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(time.perf_counter() - started)
"""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def make_tester(cache: Path, jobs: int = 2) -> Tester:
    base = CudarlConfig().tester
    return Tester(base.model_copy(update={"compile": base.compile.model_copy(update={"mode": "extension",
                                                                                     "jobs": jobs})}),
                  cache_root=cache)


def stock_build(candidate: Candidate, workdir: Path) -> dict:
    """Plain load_inline in a fresh process, torch's defaults, an empty extension folder."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "candidate.py"
    path.write_text(candidate.source)
    child_env = env.child_environment({env.TORCH_EXTENSIONS_DIR: str(workdir / "extensions")})
    for name in (env.TORCH_CUDA_ARCH_LIST, env.MAX_JOBS, env.PYTORCH_NVCC):
        child_env.pop(name, None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _STOCK, str(path)], capture_output=True, text=True,
                          env=child_env, cwd=workdir, timeout=1800, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return {"ok": False, "seconds": wall, "error": done.stderr[-600:]}
    return {"ok": True, "seconds": wall, "build_only_s": float(done.stdout.strip().splitlines()[-1])}


def cudarl_build(tester: Tester, task, candidate: Candidate) -> dict:
    started = time.perf_counter()
    built = tester.build(task, candidate)
    wall = time.perf_counter() - started
    verdict = built.verdict
    ok = built.ready
    return {"ok": ok, "seconds": wall, "compile_s": verdict.stage_seconds.get("compile"),
            "pch_s": verdict.stage_seconds.get("pch", 0.0), "cached": bool(verdict.compile and verdict.compile.cached),
            "error": "" if ok else (verdict.reasons or [""])[0][:600]}


def variant(candidate: Candidate, index: int) -> Candidate:
    return candidate.model_copy(update={"id": f"{candidate.id}/v{index}",
                                        "source": candidate.source + f"\n# variant {index}\n"})


def broken(candidate: Candidate) -> Candidate:
    """The candidate with a compile error in its CUDA source (an undefined name in the first
    kernel): what a broken candidate costs, where cudarl builds twice (lighter header, then as
    written for the real errors)."""
    source = candidate.source.replace("__global__",
                                      "__global__ void cudarl_broken() { undefined_name(); }\n__global__", 1)
    return candidate.model_copy(update={"id": f"{candidate.id}/broken", "source": source})


def latency(cache: Path, task_ids: list[str], rows: list[dict], save=lambda: None,
            with_broken: bool = True) -> list[dict]:
    tasks = {t.id: t for t in load_suite()}
    inline = {s.task_id: s for s in suite_solutions(set(task_ids))}
    nvrtc = {s.task_id: s for s in suite_solutions(set(task_ids), form="nvrtc")}
    tester = make_tester(cache)
    print(f"{'task':22s} {'stock s':>8s} {'inline s':>9s} {'x':>6s} {'hit s':>7s} {'nvrtc s':>8s} {'hit s':>7s}")
    for task_id in task_ids:
        row = {"task": task_id, "stock": stock_build(inline[task_id], cache / "stock" / task_id)}
        row["inline"] = cudarl_build(tester, tasks[task_id], inline[task_id])
        row["inline_hit"] = cudarl_build(tester, tasks[task_id], inline[task_id])
        if task_id in nvrtc:
            row["nvrtc"] = cudarl_build(tester, tasks[task_id], nvrtc[task_id])
            row["nvrtc_hit"] = cudarl_build(tester, tasks[task_id], nvrtc[task_id])
        # the PCH set-up (first inline build only) is reported apart from the build itself
        inline_s = row["inline"]["seconds"] - row["inline"]["pch_s"]
        row["inline_without_pch_setup_s"] = inline_s
        rows.append(row)
        save()
        ratio = row["stock"]["seconds"] / inline_s if row["stock"]["ok"] and row["inline"]["ok"] else float("nan")
        formats = [k for k in ("stock", "inline", "nvrtc") if k in row]
        nvrtc_cells = (f"{row['nvrtc']['seconds']:8.3f} {row['nvrtc_hit']['seconds']:7.3f}" if "nvrtc" in row
                       else f"{'-':>8s} {'-':>7s}")
        print(f"{task_id:22s} {row['stock']['seconds']:8.2f} {inline_s:9.2f} {ratio:6.2f} "
              f"{row['inline_hit']['seconds']:7.3f} {nvrtc_cells}"
              + ("" if all(row[k]["ok"] for k in formats) else "  FAILED: " + " | ".join(
                  row[k].get("error", "")[:200] for k in formats if not row[k]["ok"])),
              flush=True)
    if with_broken and task_ids:
        first = broken(inline[task_ids[0]])
        row = {"task": f"{task_ids[0]} (compile error)", "broken": True,
               "stock": stock_build(first, cache / "stock" / "broken"),
               "inline": cudarl_build(tester, tasks[task_ids[0]], first)}
        rows.append(row)
        save()
        print(f"{row['task']:22s} {row['stock']['seconds']:8.2f} {row['inline']['seconds']:9.2f} "
              f"{row['stock']['seconds'] / row['inline']['seconds']:6.2f}   "
              f"(both must fail: stock ok={row['stock']['ok']}, cudarl ok={row['inline']['ok']})", flush=True)
    return rows


def throughput(cache: Path, form: str, task_ids: list[str], count: int, workers: int) -> dict:
    tasks = {t.id: t for t in load_suite()}
    solutions = suite_solutions(set(task_ids), form=form)
    tester = make_tester(cache)
    items = [(tasks[s.task_id], variant(s, i)) for i, s in ((i, solutions[i % len(solutions)]) for i in range(count))]
    setup = tester.ensure_pch() if form == "inline" else 0.0  # before the clock starts
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda item: cudarl_build(tester, *item), items))
    wall = time.perf_counter() - started
    ok = sum(r["ok"] for r in results)
    row = {"format": form, "candidates": count, "workers": workers, "ok": ok, "wall_s": wall,
           "per_minute": ok / wall * 60.0, "p50_s": statistics.median(r["seconds"] for r in results),
           "pch_setup_s": setup, "failures": [r["error"][:300] for r in results if not r["ok"]][:3]}
    print(f"{form:8s} {count:4d} candidates, {workers} workers: {wall:7.1f} s, {row['per_minute']:7.1f} per minute "
          f"({ok} ok, build p50 {row['p50_s']:.2f} s under load"
          + (f"; precompiled header set up first in {setup:.1f} s" if setup > 1 else "") + ")", flush=True)
    return row


def summary(rows: list[dict]) -> dict:
    honest = [r for r in rows if not r.get("broken")]

    def stats(key: str) -> dict:
        values = [r[key]["seconds"] if isinstance(r[key], dict) else r[key] for r in honest
                  if key in r and (not isinstance(r[key], dict) or r[key]["ok"])]
        return {"p50": statistics.median(values), "p95": percentile(values, 0.95), "n": len(values)} if values else {}

    result = {"stock": stats("stock"), "inline": stats("inline_without_pch_setup_s"), "inline_hit": stats("inline_hit"),
              "nvrtc": stats("nvrtc"), "nvrtc_hit": stats("nvrtc_hit")}
    if result["stock"] and result["inline"]:
        result["inline_speedup_p50"] = result["stock"]["p50"] / result["inline"]["p50"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(s.task_id for s in suite_solutions(form="nvrtc")),
                        help="latency: suite tasks (inline; nvrtc too where the task has an nvrtc solution)")
    parser.add_argument("--throughput-tasks", default=",".join(s.task_id for s in suite_solutions(form="nvrtc")),
                        help="throughput: tasks whose solutions (both formats) are cycled through")
    parser.add_argument("--label", default="", help="added to the result file's name (runs split in parts)")
    parser.add_argument("--no-broken", action="store_true", help="skip the compile-error latency row")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--inline-variants", type=int, default=16)
    parser.add_argument("--nvrtc-variants", type=int, default=64)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--cache-dir", default=None, help="default: a fresh temporary folder")
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    cache = Path(args.cache_dir) if args.cache_dir else Path(tempfile.mkdtemp(prefix="cudarl-compile-"))
    task_ids = args.tasks.split(",")
    throughput_ids = args.throughput_tasks.split(",")
    machine = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}
    with contextlib.suppress(Exception):  # the table matters more than the label
        import torch

        machine.update(torch=torch.__version__, gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None)
    label = (machine.get("gpu") or f"cpu{machine['cpus']}").replace(" ", "-")
    suffix = f"-{args.label}" if args.label else ""
    out = Path(args.out_dir) / f"compile_throughput-{datetime.now(UTC):%Y-%m-%d}-{label}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    rates: list[dict] = []
    totals: dict = {}

    def save() -> None:  # after every section, so a run cut short keeps what it measured
        out.write_text(json.dumps({"created": datetime.now(UTC).isoformat(timespec="seconds"),
                                   "machine": machine, "summary": totals, "latency": rows, "throughput": rates},
                                  indent=2))

    print(f"== throughput, {args.workers} concurrent builders ==", flush=True)
    if args.nvrtc_variants:
        rates.append(throughput(cache, "nvrtc", throughput_ids, args.nvrtc_variants, args.workers))
        save()
    if args.inline_variants:
        rates.append(throughput(cache, "inline", throughput_ids, args.inline_variants, args.workers))
        save()
    print(f"== compile latency, one build at a time (cache {cache}) ==", flush=True)
    if not args.skip_latency:
        latency(cache, task_ids, rows, save, with_broken=not args.no_broken)
    totals.update(summary(rows) if rows else {})
    if totals:
        print("p50/p95 s: " + ", ".join(f"{k} {v['p50']:.3f}/{v['p95']:.3f}" for k, v in totals.items()
                                       if isinstance(v, dict) and v))
        if "inline_speedup_p50" in totals:
            print(f"cudarl inline vs stock load_inline at p50: {totals['inline_speedup_p50']:.2f}x")
    save()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
