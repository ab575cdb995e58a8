"""The ``cudarl`` command. Thin: parses arguments and config, imports heavy modules late."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[1] / "tasks" / "suite"


def _eval(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cudarl.cli.table import stdout_console, verdict_table
    from cudarl.config import load_config
    from cudarl.files import ReportError, check_writable
    from cudarl.tasks import load_tasks
    from cudarl.tasks.loaders import select_tasks
    from cudarl.tasks.report import LoadReport
    from cudarl.tester import Tester, load_candidates
    from cudarl.tester.batch import build_report, evaluate_all, pair_candidates, write_report

    console = Console(stderr=True, soft_wrap=True)
    # Bad input raises here, before any judging; main() turns it into one line.
    check_writable(Path(args.out))
    config = load_config(args.config)
    if args.compile_mode:
        config = config.with_changes({"tester.compile.mode": args.compile_mode})
    loaded = LoadReport(source=str(args.tasks))
    tasks = select_tasks(load_tasks(args.tasks, loaded), args.only)
    candidates = load_candidates(args.candidates)
    if args.only:
        candidates = [c for c in candidates if c.task_id in {t.id for t in tasks}]
    tester = Tester(config.tester)
    _ = tester.toolchain
    for bad in loaded.skipped:
        console.print(f"[yellow]warning:[/yellow] task skipped: {escape(bad.where)}: {escape(bad.reason)}")
    pairs, unmatched = pair_candidates(tasks, candidates)
    for task_id in sorted({c.task_id for c in unmatched}):
        console.print(f"[yellow]warning:[/yellow] candidates for unknown task {escape(repr(task_id))} are skipped "
                      "(listed in the report's 'unmatched')")
    if not pairs:
        console.print("[red]error:[/red] no candidate matches any task")
        return 2
    console.print(f"{len(pairs)} candidate(s), {len(tasks)} task(s); compile mode {tester.mode}, "
                  f"arch sm_{tester.arch}; GPU: {'yes' if tester.has_gpu else 'no'}")
    if not tester.has_gpu:
        console.print("[yellow]No CUDA GPU here: running guard, compile and load only; "
                      "correctness and timing are skipped.[/yellow]")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        building = progress.add_task("compile", total=len(pairs))
        running = progress.add_task("run", total=len(pairs))

        def advance(phase: str, _verdict) -> None:
            progress.advance(building if phase == "compile" else running)

        if args.address or args.pool:
            from cudarl.pool import PoolError

            try:
                verdicts = _judge_on_pool(args, config, pairs, advance)
            except PoolError as exc:
                console.print(f"[red]error:[/red] {escape(str(exc))}")
                return 2
        else:
            verdicts = evaluate_all(tester, pairs, build_workers=args.build_workers, progress=advance)
    report = build_report(tester, verdicts, unmatched, loaded.skipped)
    failed: ReportError | None = None
    try:  # the report first: nothing printed after judging may lose it
        write_report(report, Path(args.out))
    except ReportError as exc:
        failed = exc
    stdout_console().print(verdict_table(verdicts))
    written = f"[red]error:[/red] {escape(str(failed))}" if failed else f"report written to {escape(args.out)}"
    console.print(f"summary: {report['summary']}; {written}")
    return 2 if failed else 0


def _judge_on_pool(args: argparse.Namespace, config, pairs, advance) -> list:
    """Verdicts from the tester pool (the cluster's at ``--address``, or a local one); the progress
    bars move as verdicts land (a verdict means both stages are done)."""
    from cudarl.pool import start_pool

    pool = start_pool(config, address=args.address)
    try:
        def landed(verdict) -> None:
            advance("compile", verdict)
            advance("run", verdict)

        return pool.judge(pairs, progress=landed)
    finally:
        if not args.address:
            pool.shutdown()


def _config(args: argparse.Namespace) -> int:
    from cudarl.config import CudarlConfig, describe_defaults

    print(describe_defaults(CudarlConfig()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cudarl", description="Train and evaluate CUDA-kernel agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    evaluate = commands.add_parser("eval", help="judge candidates against tasks and write a JSON report")
    evaluate.add_argument("tasks", nargs="?", default=str(SUITE),
                          help="folder of KernelBench files or a .jsonl file (default: the built-in suite)")
    evaluate.add_argument("candidates", nargs="?", default=str(SUITE / "solutions"),
                          help="folder (<task>.py or <task>/<name>.py) or .jsonl (default: the suite's solutions)")
    evaluate.add_argument("--only", help="comma-separated task ids to evaluate (others are ignored)")
    evaluate.add_argument("--config", help="TOML config file (see `cudarl config`)")
    evaluate.add_argument("--out", default="cudarl-report.json", help="where to write the JSON report")
    evaluate.add_argument("--compile-mode", choices=["auto", "extension", "kernel"],
                          help="override tester.compile.mode")
    evaluate.add_argument("--build-workers", type=int, default=2, help="candidates built at once")
    evaluate.add_argument("--address", help="judge on the tester pool of the Ray cluster at this address "
                                            "(started there if none runs; `auto`: this machine's cluster)")
    evaluate.add_argument("--pool", action="store_true", help="judge on a tester pool in a local Ray started here")
    evaluate.set_defaults(handler=_eval)
    from cudarl.cli.dashboards import add_parser as add_dashboards_parser
    from cudarl.cli.demo import add_parser as add_demo_parser
    from cudarl.cli.serve import add_parser as add_serve_parser
    from cudarl.cli.sft import add_parser as add_sft_parser
    from cudarl.cli.tasks import add_parser as add_tasks_parser
    from cudarl.cli.tester import add_parser as add_tester_parser
    from cudarl.cli.train import add_parser as add_train_parser

    add_tasks_parser(commands)
    add_tester_parser(commands)
    add_sft_parser(commands)
    add_train_parser(commands)
    add_demo_parser(commands)
    add_serve_parser(commands)
    add_dashboards_parser(commands)
    show = commands.add_parser("config", help="print every setting with its default and meaning")
    show.set_defaults(handler=_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Every command's bad input (config, task or candidate files, report path) ends in one line
    on stderr and exit code 2, never a traceback."""
    from cudarl.config import ConfigError
    from cudarl.files import ReportError
    from cudarl.tasks.candidate import CandidateError
    from cudarl.tasks.task import TaskError
    from cudarl.tester.build.toolchain import ToolchainError

    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, TaskError, CandidateError, ReportError, ToolchainError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
