"""``cudarl sft``: the warm start from the command line (settings from the ``[sft]`` table of a
config file, any of them overridden with ``--set name=value``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _sft(args: argparse.Namespace) -> int:
    from cudarl.cli.overrides import parse_overrides
    from cudarl.config import load_config
    from cudarl.files import check_writable

    config = load_config(args.config).sft
    changes = parse_overrides(args.set, "name=value (see `cudarl config`, section [sft])")
    if args.model:
        changes["base_model"] = args.model
    if changes:
        config = config.with_changes(changes)
    out = Path(args.out)
    check_writable(out / "config.json")
    from cudarl.sft.train import run_sft

    try:
        results = run_sft(config, out)
    except ValueError as exc:  # bad data or settings: one line, the reports already written
        print(f"cudarl sft: {exc}", file=sys.stderr)
        return 2
    for result in results:
        held = f", held-out loss {result.held_out_loss:.4f}" if result.held_out_loss is not None else ""
        losses = (f"loss {result.first_loss:.4f} -> {result.last_loss:.4f}" if result.first_loss is not None
                  else "no loss logged")
        print(f"{result.role}: {result.steps} steps, {losses}{held}; adapter in {result.adapter}")
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("sft", help="warm start: fine-tune the generator's and optimizer's LoRA adapters")
    parser.add_argument("--config", help="TOML config file; its [sft] table (see `cudarl config`)")
    parser.add_argument("--model", help="base model: hub id or local folder (overrides sft.base_model)")
    parser.add_argument("--out", default="cudarl-sft", help="output folder (adapters, checkpoints, reports)")
    parser.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="override one [sft] setting, e.g. --set max_steps=200 --set archive=/data/sakana")
    parser.set_defaults(handler=_sft)
