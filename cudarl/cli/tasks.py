"""``cudarl tasks list|show|check|export``: the suite (or a loaded dataset) from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path


def _load(args: argparse.Namespace):
    """Tasks from --kernelbench, --sakana, --tasks, or the built-in suite; prints skip counts."""
    from cudarl.tasks import load_tasks
    from cudarl.tasks.builtin import load_suite

    if args.kernelbench:
        from cudarl.tasks.kernelbench import load_kernelbench

        tasks, report = load_kernelbench(args.kernelbench, strict=False)
        print(report.summary(), file=sys.stderr)
        return tasks
    if args.sakana:
        from cudarl.tasks.sakana import load_sakana

        tasks, examples, report = load_sakana(args.sakana)
        print(report.summary() + f"; {len(examples)} kernel examples", file=sys.stderr)
        return tasks
    if not args.tasks:
        return load_suite()
    from cudarl.tasks.report import LoadReport

    report = LoadReport(source=str(args.tasks))
    tasks = load_tasks(args.tasks, report)
    if report.skipped:
        print(report.summary(), file=sys.stderr)
    return tasks


def _filter(tasks, only: str | None, tier: str | None):
    from cudarl.tasks import TaskError
    from cudarl.tasks.loaders import select_tasks

    try:
        return select_tasks(tasks, only, tier)
    except TaskError as exc:
        raise SystemExit(f"error: {exc}") from exc


def tasks_list(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from cudarl.cli.table import stdout_console
    from cudarl.tasks.builtin import SOLUTIONS_DIR

    tasks = _filter(_load(args), args.only, args.tier)
    table = Table(title=f"{len(tasks)} tasks")
    for column in ("id", "tier", "dtype", "tolerance", "hidden shapes", "solution", "speedup"):
        table.add_column(column)
    for task in tasks:
        atol, rtol = task.tolerances(1e-4, 1e-2)
        has_solution = (SOLUTIONS_DIR / f"{task.id}.py").exists()
        table.add_row(escape(task.id), task.tier, task.dtype, f"{atol:g}/{rtol:g}",
                      ", ".join(f"{k}={v}" for k, v in task.hidden.items()) or "-",
                      "yes" if has_solution else "-",
                      f"{task.measured.speedup:.2f}x" if task.measured else "-")
    stdout_console().print(table)
    counts = {tier: sum(t.tier == tier for t in tasks) for tier in ("easy", "medium", "hard")}
    print(f"tiers: {counts}")
    return 0


def tasks_show(args: argparse.Namespace) -> int:
    (task,) = _filter(_load(args), args.id, None) or [None]
    if task is None:
        print(f"error: no task {args.id!r}", file=sys.stderr)
        return 2
    print(task.model_dump_json(indent=2, exclude={"source"}))
    print(task.source)
    return 0


def tasks_check(args: argparse.Namespace) -> int:
    """Judge the suite's reference solutions; with --record, write measured speedups back."""
    from cudarl.cli.table import stdout_console, verdict_table
    from cudarl.config import load_config
    from cudarl.tasks.builtin import load_suite, suite_solutions
    from cudarl.tester import Tester
    from cudarl.tester.batch import build_report, evaluate_all, pair_candidates, write_report

    tasks = _filter(load_suite(), args.only, args.tier)
    pairs, _ = pair_candidates(tasks, suite_solutions({t.id for t in tasks}))
    tester = Tester(load_config(args.config).tester)
    print(f"checking {len(pairs)} reference solutions (GPU: {'yes' if tester.has_gpu else 'no'})", file=sys.stderr)
    done = [0]
    partial = Path(f"{args.out}.partial.jsonl")  # each verdict as it comes: survives a killed run
    partial.unlink(missing_ok=True)

    def progress(phase: str, verdict) -> None:
        if phase == "run":
            done[0] += 1
            speed = f" {verdict.timing.speedup:.2f}x" if verdict.timing else ""
            print(f"[{done[0]}/{len(pairs)}] {verdict.candidate_id}: {verdict.outcome.value}{speed}", file=sys.stderr)
            with partial.open("a") as handle:
                handle.write(verdict.to_json() + "\n")

    verdicts = evaluate_all(tester, pairs, build_workers=args.build_workers, progress=progress)
    write_report(build_report(tester, verdicts), Path(args.out))  # before printing: nothing after judging loses it
    stdout_console().print(verdict_table(verdicts))
    if args.record:
        print(f"recorded {_record(verdicts)} measurement(s) in the suite's TOML files", file=sys.stderr)
    failed = [v.candidate_id for v in verdicts if not (v.correct or v.outcome.value == "compiled")]
    print(f"{len(verdicts) - len(failed)} of {len(verdicts)} reference solutions ok; report: {args.out}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _record(verdicts) -> int:
    """Write each timed, correct verdict's figures into its task's ``[measured]`` table."""
    from cudarl.tasks.builtin import record_measurement
    from cudarl.tasks.task import Measured

    today = datetime.now(UTC).strftime("%Y-%m-%d")
    count = 0
    for verdict in verdicts:
        if verdict.timing is not None and verdict.correct:
            record_measurement(verdict.task_id, Measured(
                speedup=verdict.timing.speedup, solution_ms=verdict.timing.candidate.median_ms,
                reference_ms=verdict.timing.reference.median_ms, device=verdict.timing.device, date=today))
            count += 1
    return count


def tasks_record(args: argparse.Namespace) -> int:
    """Record measurements from a report that ``check`` (or ``eval``) wrote on a GPU machine, or
    from its ``.partial.jsonl`` when the run was cut short."""
    from cudarl.tasks.builtin import load_suite
    from cudarl.tester.verdict import Verdict

    text = Path(args.report).read_text()
    if args.report.endswith(".jsonl"):
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        rows = json.loads(text)["verdicts"]
    known = {t.id for t in load_suite()}
    verdicts = [Verdict.model_validate(v) for v in rows]
    verdicts = [v for v in verdicts if v.task_id in known and v.candidate_id == f"{v.task_id}/solution"]
    print(f"recorded {_record(verdicts)} measurement(s) from {args.report}")
    return 0


def tasks_export(args: argparse.Namespace) -> int:
    """The tasks as another trainer's dataset files (verl: train.parquet and val.parquet)."""
    from cudarl.verl_env.rows import write_parquet

    tasks = _filter(_load(args), args.only, args.tier)
    try:
        written = write_parquet(tasks, Path(args.out), validation_fraction=args.val_fraction, seed=args.seed)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    for split, path in written.items():
        print(f"{split}: {path}")
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("tasks", help="list, show or check tasks (default: the built-in suite)")
    sub = parser.add_subparsers(dest="tasks_command", required=True)
    for name, handler, text in [("list", tasks_list, "list tasks with tiers"),
                                ("show", tasks_show, "one task's metadata and source"),
                                ("check", tasks_check, "judge the suite's reference solutions"),
                                ("export", tasks_export, "write the tasks as verl's parquet dataset files")]:
        command = sub.add_parser(name, help=text)
        command.set_defaults(handler=handler)
        if name != "check":
            source = command.add_mutually_exclusive_group()
            source.add_argument("--tasks", help="a folder of KernelBench files or a .jsonl of tasks")
            source.add_argument("--kernelbench", help="a KernelBench checkout (level1..level4 folders)")
            source.add_argument("--sakana", help="the Sakana archive: a folder of parquet files or a hub id")
        if name == "show":
            command.add_argument("id")
        else:
            command.add_argument("--only", help="comma-separated task ids")
            command.add_argument("--tier", choices=["easy", "medium", "hard"])
        if name == "export":
            command.add_argument("--format", choices=["verl"], default="verl", help="the trainer's format")
            command.add_argument("--out", required=True, help="folder for train.parquet and val.parquet")
            command.add_argument("--val-fraction", type=float, default=0.1,
                                 help="share of whole tasks held out for validation (default 0.1)")
            command.add_argument("--seed", type=int, default=0, help="the split's shuffle seed")
        if name == "check":
            command.add_argument("--config", help="TOML config file")
            command.add_argument("--out", default="cudarl-tasks-check.json")
            command.add_argument("--build-workers", type=int, default=2)
            command.add_argument("--record", action="store_true",
                                 help="write measured speedups into the suite's TOML files")
    record = sub.add_parser("record", help="write measured speedups from a check report into the suite")
    record.add_argument("report", help="the JSON report of `cudarl tasks check` run on a GPU machine")
    record.set_defaults(handler=tasks_record)
