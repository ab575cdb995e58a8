"""``cudarl train``: the RL run from the command line, on an embedded local Ray or a cluster
(``--address``; the same entry point runs under ``ray job submit``). Settings: a config file's
tables (``[train]``, ``[reward]``, ``[algorithm]``, ``[curriculum]``, ``[pool]``, ...), any of
them overridden with ``--set table.name=value``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _train(args: argparse.Namespace) -> int:
    from cudarl.cli.overrides import parse_overrides
    from cudarl.config import load_config
    from cudarl.files import check_writable

    config = load_config(args.config)
    changes = parse_overrides(args.set, "table.name=value, e.g. train.steps=20 (see `cudarl config`)", dotted=True)
    if args.model:
        changes["train.model"] = args.model
    if changes:
        config = config.with_changes(changes)
    out = Path(args.out)
    check_writable(out / "steps.jsonl")
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cudarl.pool.client import start_pool
    from cudarl.rl.driver import run_training
    from cudarl.tasks.builtin import load_suite

    tasks = [task for task in load_suite() if task.tier in config.curriculum.tiers]
    try:  # before any worker starts: a model that cannot be reached is a one-line error
        from transformers import AutoConfig

        AutoConfig.from_pretrained(config.train.model)
    except (OSError, ValueError) as exc:  # unreachable, or a folder that holds no model
        print(f"cudarl train: model {config.train.model!r}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    pool = start_pool(config, address=args.address)

    console = Console(stderr=True)
    bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, disable=not console.is_terminal)
    steps = bars.add_task("starting: model, update workers", total=config.train.steps)

    def show(record) -> None:
        stats = record.stats
        speedup = f"{stats['median_speedup']:.2f}x" if stats["median_speedup"] else "-"
        seconds = record.seconds
        line = (f"step {record.step + 1}/{config.train.steps} [{record.tier}] reward {stats['mean_reward']:+.3f} "
                f"pass {stats['pass_rate']:.2f} compile {stats['compile_rate']:.2f} median speedup {speedup} "
                f"turns {stats['mean_turns']:.1f} v{record.weights_version} lag {stats['version_lag']} "
                f"{seconds['step']:.1f}s (rollout {seconds['rollout']:.1f} judge {seconds['judge']:.1f} "
                f"update {seconds['update']:.1f} sync {seconds['sync']:.1f})")
        bars.update(steps, completed=record.step + 1)
        if console.is_terminal:
            bars.console.print(line)
        else:
            print(line, flush=True)

    def phase(step: int, name: str) -> None:
        bars.update(steps, description=f"step {step + 1}: {name}")

    try:
        with bars:
            run_training(config, out, tasks, pool.judge, progress=show, resume=args.resume, on_phase=phase)
    except (ValueError, RuntimeError, OSError) as exc:  # OSError: a model or tokenizer that cannot be loaded
        print(f"cudarl train: {str(exc).splitlines()[0]}", file=sys.stderr)
        if isinstance(exc, RuntimeError) and (out / "checkpoints").is_dir():
            print(f"cudarl train: the checkpoints in {out} stay; continue with --resume", file=sys.stderr)
        return 2
    print(f"done: steps in {out / 'steps.jsonl'}, checkpoints in {out / 'checkpoints'}")
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("train", help="RL: multi-turn GRPO of the generator and optimizer on the tester")
    parser.add_argument("--config", help="TOML config file (see `cudarl config`)")
    parser.add_argument("--model", help="base model: hub id or local folder (overrides train.model)")
    parser.add_argument("--out", default="cudarl-train", help="output folder (steps.jsonl, checkpoints, config)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last whole checkpoint in --out (same settings, same seeds)")
    parser.add_argument("--address", help="Ray cluster to join ('auto': this machine's); default: a local Ray")
    parser.add_argument("--set", action="append", metavar="TABLE.NAME=VALUE",
                        help="override one setting, e.g. --set train.steps=20 --set reward.rejected=-1")
    parser.set_defaults(handler=_train)
