"""Learning in the kernel domain: a tiny random policy picks among parametrized kernels for a few
suite tasks (``cudarl.rl.kernel_choices``), trained by the full loop (``cudarl.rl.kernel_learning``:
GRPO, Ray Train update workers, verified weight sync) on full verdicts. Run on a GPU machine:

    python3 benchmarks/kernel_learning.py [--steps 30] [--group-size 8] [--judge local|pool] [--out PATH]

First every choice of every task is judged once (the grid's measured speedups: was the choice the
policy converged to the fastest correct one?); then the steps. Verdicts of a (task, source) pair
already judged are reused (the pool's dedupe; ``LocalJudge`` does the same), so after the first
pass a step costs the policy's time only and the rewards of a choice do not change between steps.
Prints the grid, a line per step and the curve; writes ``benchmarks/results/kernel_learning-
<date>-<gpu>.json`` (machine, settings, the grid's verdicts, every step's record, the summary).

Without a GPU the tester stops after compiling and loading: every verdict is ``compiled``, every
reward 0 and nothing is learned. That is a smoke run of the whole path (say ``--steps 2
--group-size 2 --no-measure`` to keep it short), never a result.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from run_metadata import ROOT, run_metadata

from cudarl.config import CudarlConfig
from cudarl.files import write_text_atomic
from cudarl.rl.kernel_choices import TASKS, choices, describe
from cudarl.rl.kernel_learning import (
    KernelLearningSettings,
    KernelStep,
    make_policy,
    measure_choices,
    train_kernel_choices,
)
from cudarl.rl.local_judge import LocalJudge
from cudarl.tasks.builtin import load_suite
from cudarl.tester import Tester

VOCAB = 128
TAIL = 5  # steps averaged at the start and at the end of the curve


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def print_grid(rows: list[dict]) -> None:
    print(f"\n{'task':11s} {'#':>2s} {'choice':34s} {'expect':6s} {'outcome':13s} {'speedup':>8s} {'ms':>9s}")
    for row in rows:
        print(
            f"{row['task']:11s} {row['index']:2d} {row['name']:34s} {row['expect']:6s} {row['outcome']:13s} "
            f"{_num(row['speedup']):>8s} {_num(row['candidate_ms'], 4):>9s}"
        )


def print_step(entry: KernelStep) -> None:
    picks = " ".join(f"{task}={'/'.join(str(n) for n in counts)}" for task, counts in entry.choices.items())
    print(
        f"step {entry.step:3d}  reward {entry.mean_reward:6.3f}  pass {entry.pass_rate:5.2f}  "
        f"compile {entry.compile_rate:5.2f}  speedup {_num(entry.mean_speedup):>6s} "
        f"(geo {_num(entry.geomean_speedup):>6s})  v{entry.weights_version}->v{entry.synced_version}  "
        f"{entry.seconds:5.1f} s (judge {entry.judge_seconds:4.1f})  {picks}",
        flush=True,
    )


def summarize_run(grid: list[dict], log: list[KernelStep], task_ids: list[str]) -> dict:
    """The curve's start and end, and per task: the choice picked most in the last steps against
    the fastest correct choice of the grid."""
    first, last = log[:TAIL], log[-TAIL:]
    figures = {}
    for name in ("mean_speedup", "geomean_speedup", "pass_rate", "compile_rate", "mean_reward"):
        figures[name] = {
            "first": _mean([getattr(e, name) for e in first]),
            "last": _mean([getattr(e, name) for e in last]),
        }
    per_task = {}
    for task_id in task_ids:
        counts: Counter = Counter()
        for entry in last:
            counts.update({index: n for index, n in enumerate(entry.choices[task_id]) if n})
        final = log[-1].choices[task_id]
        top = counts.most_common(1)[0][0] if counts else None
        measured = {row["index"]: row for row in grid if row["task"] == task_id}
        correct = [row for row in measured.values() if row["correct"] and row["speedup"] is not None]
        fastest = max(correct, key=lambda row: row["speedup"]) if correct else None
        per_task[task_id] = {
            "final_histogram": final,
            "top_choice_last_steps": top,
            "top_choice_name": choices(task_id)[top].name if top is not None else None,
            "top_choice_speedup": measured[top]["speedup"] if top in measured else None,
            "fastest_correct": fastest["index"] if fastest else None,
            "fastest_correct_name": fastest["name"] if fastest else None,
            "fastest_correct_speedup": fastest["speedup"] if fastest else None,
            "converged_to_fastest": bool(fastest) and top == fastest["index"],
        }
    return {"figures": figures, "per_task": per_task}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--learning-rate", type=float, default=KernelLearningSettings.learning_rate)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ranks", type=int, default=1, help="update workers (FSDP2 over gloo when more than one)")
    parser.add_argument(
        "--judge",
        choices=["local", "pool"],
        default="local",
        help="a local Tester (parallel builds, judges taking turns on the GPU) or a TesterPool on the local Ray",
    )
    parser.add_argument("--judge-workers", type=int, default=2, help="concurrent judges of the local Tester")
    parser.add_argument("--no-reuse", action="store_true", help="judge every candidate afresh (local judge only)")
    parser.add_argument("--no-measure", action="store_true", help="skip judging the whole grid first")
    parser.add_argument("--cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--commit", default=None, help="the tree's commit where it has no git history")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import ray

    started = time.monotonic()
    config = CudarlConfig()
    work = Path(tempfile.mkdtemp(prefix="kernel-learning-"))
    tasks = {t.id: t for t in load_suite() if t.id in args.tasks}
    metadata = run_metadata(args.commit)
    gpu = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(
        args.out
        or ROOT / "benchmarks" / "results" / f"kernel_learning-{datetime.now(UTC).date().isoformat()}-{gpu}.json"
    )
    settings = KernelLearningSettings(
        tasks=tuple(args.tasks),
        steps=args.steps,
        group_size=args.group_size,
        learning_rate=args.learning_rate,
        ranks=args.ranks,
        seed=args.seed,
    )
    grid: list[dict] = []
    log: list[KernelStep] = []
    pool = None
    if args.judge == "pool":
        from cudarl.pool import start_pool

        pool = start_pool(config, num_cpus=args.cpus)
        judge = pool.judge
        has_gpu = metadata["gpu"] is not None  # the pool's bench workers run on this machine's GPU
    else:
        ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level="ERROR")
        tester = Tester(config.tester, cache_root=work / "cache")
        judge = LocalJudge(tester, build_workers=8, judge_workers=args.judge_workers, reuse=not args.no_reuse)
        has_gpu = tester.has_gpu
    mode = "full verdicts" if has_gpu else "compile-only smoke (no GPU: every verdict 'compiled', every reward 0)"

    def write() -> None:
        """The report so far (after the grid and after every step: a run cut short keeps its curve)."""
        report = {
            "machine": metadata,
            "mode": mode,
            "settings": {
                **vars(args),
                "vocab": VOCAB,
                "reward": settings.reward.model_dump(),
                "lora": asdict(settings.lora),
                "tester": config.tester.model_dump(mode="json"),
            },
            "grid": grid,
            "steps": [entry.to_json() for entry in log],
            "summary": summarize_run(grid, log, args.tasks) if log else None,
            "seconds": time.monotonic() - started,
        }
        write_text_atomic(out, json.dumps(report, indent=2, default=str))

    def step_done(entry: KernelStep) -> None:
        log.append(entry)
        print_step(entry)
        write()

    print(describe(args.tasks))
    if not has_gpu:
        print(
            "\nNO GPU: verdicts stop after compile and load (outcome 'compiled'), every reward is 0 and the policy "
            "learns nothing. This is a smoke run of the path, not a result."
        )
    try:
        if not args.no_measure:
            measuring = time.monotonic()
            grid = measure_choices(judge, tasks, args.tasks)
            print_grid(grid)
            print(f"grid judged in {time.monotonic() - measuring:.0f} s")
            write()
        make_policy(str(work / "policy"), VOCAB, seed=args.seed)
        print(f"\n{args.steps} steps, {len(args.tasks)} tasks x {args.group_size} answers per step")
        train_kernel_choices(str(work / "policy"), VOCAB, judge, tasks, settings, progress=step_done)
    finally:
        if pool is not None:
            pool.shutdown()
        ray.shutdown()

    summary = summarize_run(grid, log, args.tasks)
    print(f"\n{'':16s} {'first ' + str(TAIL):>10s} {'last ' + str(TAIL):>10s}")
    for name, pair in summary["figures"].items():
        print(f"{name:16s} {_num(pair['first']):>10s} {_num(pair['last']):>10s}")
    print(f"\n{'task':11s} {'picked most (last steps)':38s} {'speedup':>8s}  {'fastest correct':34s} {'speedup':>8s}")
    for task_id, row in summary["per_task"].items():
        print(
            f"{task_id:11s} {str(row['top_choice_last_steps']) + ' ' + str(row['top_choice_name']):38s} "
            f"{_num(row['top_choice_speedup']):>8s}  {str(row['fastest_correct_name']):34s} "
            f"{_num(row['fastest_correct_speedup']):>8s}"
        )
    write()
    print(f"wrote {out} ({time.monotonic() - started:.0f} s in all; {mode})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
