"""``cudarl demo``: the warm start, then multi-turn GRPO on the real tester pool, on an embedded
default (``cudarl.demo.run``); a table per step at the end and a report folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cudarl.cli.table import stdout_console
    from cudarl.demo.run import DemoSettings, run_demo

    if args.steps < 1 or args.sft_steps < 1:
        print("cudarl demo: --steps and --sft-steps must be at least 1", file=sys.stderr)
        return 2
    console = Console(stderr=True, soft_wrap=True)
    settings = DemoSettings(out=Path(args.out).resolve(), steps=args.steps, sft_steps=args.sft_steps, model=args.model,
                            config=args.config, address=args.address)
    bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, disable=not console.is_terminal)
    steps = bars.add_task("GRPO: starting the model, the update workers and the tester pool", total=args.steps,
                          visible=False)

    def say(line: str) -> None:
        console.print(escape(line))

    def phase(step: int, name: str) -> None:
        bars.update(steps, description=f"GRPO step {step + 1}: {name}", visible=True)

    def show(record) -> None:
        stats = record.stats
        bars.update(steps, completed=record.step + 1)
        line = (f"step {record.step + 1}/{args.steps} [{record.tier}] reward {stats['mean_reward']:+.3f} "
                f"compiled {stats['compile_rate']:.2f} passed {stats['pass_rate']:.2f} "
                f"{record.seconds['step']:.1f}s")
        bars.console.print(escape(line)) if console.is_terminal else print(line, file=sys.stderr, flush=True)

    try:
        with bars:
            result = run_demo(settings, say=say, show_step=show, on_phase=phase)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"cudarl demo: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a Ray worker or the local Ray itself died (another `ray stop` on this machine)
        from ray.exceptions import RayError

        if not isinstance(exc, RayError):
            raise
        print(f"cudarl demo: Ray failed: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 2
    stdout_console().print(_table(result))
    verdicts = "full verdicts" if result.has_gpu else "compile-only verdicts (no GPU)"
    seconds = ", ".join(f"{name} {value:.0f} s" for name, value in result.seconds.items())
    print(f"{verdicts}; {seconds}; report in {result.report}")
    return 0


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (a validation error's lines joined), or its type's name."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) if lines else type(exc).__name__


def _table(result):
    from rich.table import Table

    table = Table(title="cudarl demo: GRPO steps")
    for column in ("step", "tier", "reward", "compiled", "passed", "best speedup", "seconds"):
        table.add_column(column, justify="right")
    for row in result.rows:
        speedup = f"{row['best_speedup']:.2f}x" if row["best_speedup"] else "-"
        table.add_row(str(row["step"]), row["tier"], f"{row['reward']:+.3f}", f"{row['compile_rate']:.2f}",
                      f"{row['pass_rate']:.2f}", speedup, f"{row['seconds']:.1f}")
    return table


def add_parser(commands) -> None:
    parser = commands.add_parser("demo", help="the warm start then multi-turn GRPO on the tester, on a default")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (default 3)")
    parser.add_argument("--sft-steps", type=int, default=40, help="warm-start steps per role (default 40)")
    parser.add_argument("--model", help="hub id or local folder of a real model (default: a tiny one built here)")
    parser.add_argument("--config", help="TOML config file whose settings override the demo's (see `cudarl config`)")
    parser.add_argument("--out", default="cudarl-demo", help="output folder (model, sft, train, report)")
    parser.add_argument("--address", help="Ray cluster to run on ('auto': this machine's); default: a local Ray")
    parser.set_defaults(handler=_demo)
