"""The human-readable table of verdicts that ``cudarl eval`` prints. Every text a candidate
can influence (ids, reasons, compiler errors) is escaped: ``[/oops]`` or ``[import]`` print as written."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cudarl.tester.verdict import Verdict


def stdout_console() -> Console:
    """Tables go to stdout; when it is not a terminal (a log, a pipe), use a wide fixed width
    instead of rich's 80 columns, which would fold every row."""
    return Console(width=None if sys.stdout.isatty() else 200)


def _first_line(text: str, width: int = 70) -> str:
    line = next((row for row in text.splitlines() if row.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def verdict_table(verdicts: list[Verdict]) -> Table:
    table = Table(title="cudarl eval")
    for column in ("candidate", "outcome", "stage", "compile s", "regs (max)", "max abs err",
                   "cand ms", "ref ms", "speedup", "reason / skipped"):
        table.add_column(column, overflow="fold")
    for v in verdicts:
        colour = "green" if v.correct or v.outcome.value == "compiled" else "red"
        regs = max((k.registers for k in v.compile.kernels), default=None) if v.compile else None
        note = _first_line(v.reasons[0]) if v.reasons else ("; ".join(v.skipped) if v.skipped else "")
        table.add_row(
            escape(v.candidate_id), f"[{colour}]{v.outcome.value}[/{colour}]", v.stage.value,
            f"{v.compile.seconds:.1f}{' (cached)' if v.compile.cached else ''}" if v.compile else "-",
            str(regs) if regs is not None else "-",
            f"{v.correctness.max_abs_error:.2e}" if v.correctness and v.correctness.trials_run else "-",
            f"{v.timing.candidate.median_ms:.4f}" if v.timing else "-",
            f"{v.timing.reference.median_ms:.4f}" if v.timing else "-",
            f"{v.timing.speedup:.2f}x" if v.timing else "-",
            escape(note),  # candidate-controlled text (compiler errors, reasons): never markup
        )
    return table
