"""The prompts of the two roles, rendered from the templates in ``cudarl/prompts/``.

Templates are plain ``string.Template`` text (``$name`` fields): kernels and Python are full of
braces, which ``str.format`` would trip on, and no template engine is needed for filling in a
few fields. Values are inserted as they are, never re-read as templates.

Covered: the system prompt (both candidate formats, each with a worked vector add); the
generator's prompt from a task; the optimizer's prompt from the task and the turns so far
(current best candidate, speedup per turn, strategies already tried, the last feedback).
Not covered: chat formatting and tokenization (the rollout engine owns them; episodes append
feedback as tokens and never re-render history), and trimming a history too long for the
context (the caller chooses which turns to pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

from cudarl.agents.feedback import feedback_text
from cudarl.agents.parsing import ParsedAnswer
from cudarl.config import CorrectnessConfig
from cudarl.tasks.task import Task
from cudarl.tester.verdict import Verdict

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@dataclass(frozen=True)
class TurnSummary:
    """One optimizer turn as the next prompt needs it. ``speedup`` is None unless the candidate
    was correct and timed; ``outcome`` (the verdict's) says what went wrong otherwise."""

    source: str
    feedback: str
    speedup: float | None = None
    strategy: str = ""
    outcome: str = ""


@cache
def _template(name: str) -> Template:
    return Template((PROMPTS_DIR / f"{name}.md").read_text(encoding="utf-8"))


def _render(name: str, **fields: str) -> str:
    return _template(name).substitute(fields).strip() + "\n"


def _tolerances(task: Task, correctness: CorrectnessConfig | None) -> tuple[str, str]:
    config = correctness or CorrectnessConfig()
    atol, rtol = task.tolerances(config.fp32_tolerance, config.half_tolerance)
    return f"{atol:g}", f"{rtol:g}"


def _task_fields(task: Task, correctness: CorrectnessConfig | None) -> dict[str, str]:
    atol, rtol = _tolerances(task, correctness)
    return {"task_id": task.id, "description": task.description.strip() or "(no description)",
            "dtype": task.dtype, "atol": atol, "rtol": rtol, "reference": task.source.strip("\n")}


def system_prompt() -> str:
    """The rules and both formats, shared by both roles so a policy learns one contract."""
    return _render("system", formats=_template("formats").template.strip())


def generator_prompt(task: Task, correctness: CorrectnessConfig | None = None) -> str:
    """The first turn: the task's reference and what a valid answer looks like. Tolerances are
    the task's own or the tester's defaults (``correctness``), so the prompt states what is judged."""
    return _render("generator", **_task_fields(task, correctness))


def summarize_turn(answer: ParsedAnswer, verdict: Verdict, previous_speedup: float | None = None) -> TurnSummary:
    """A judged turn as the optimizer's history keeps it."""
    speedup = verdict.speedup if verdict.correct else None
    return TurnSummary(source=answer.source or "", feedback=feedback_text(verdict, previous_speedup),
                       speedup=speedup, strategy=answer.strategy,
                       outcome=str(getattr(verdict.outcome, "value", verdict.outcome)))


def best_turn(turns: list[TurnSummary]) -> tuple[int, TurnSummary] | None:
    """The fastest correct turn (the latest on a tie), as (index, turn); None if none is correct."""
    timed = [(turn.speedup, index) for index, turn in enumerate(turns) if turn.speedup is not None]
    if not timed:
        return None
    _, index = max(timed)
    return index, turns[index]


def _trajectory(turns: list[TurnSummary]) -> str:
    lines = []
    for number, turn in enumerate(turns, start=1):
        result = f"{turn.speedup:.3g}x" if turn.speedup is not None else (turn.outcome or "not correct")
        lines.append(f"- turn {number}: {result}" + (f" ({turn.strategy})" if turn.strategy else ""))
    return "\n".join(lines)


def _tried(turns: list[TurnSummary]) -> str:
    seen: dict[str, str] = {}
    for turn in turns:
        key = " ".join(turn.strategy.lower().split())
        if key and key not in seen:
            seen[key] = turn.strategy
    return "\n".join(f"- {strategy}" for strategy in seen.values()) or "(no strategies stated yet)"


def optimizer_prompt(task: Task, turns: list[TurnSummary], correctness: CorrectnessConfig | None = None) -> str:
    """A later turn: the best version so far to build on, what was tried and how it went, and
    the last verdict's feedback. Raises ValueError without turns (that is the generator's turn)."""
    if not turns:
        raise ValueError("optimizer_prompt needs at least one judged turn; the first turn is generator_prompt's")
    best = best_turn(turns)
    last = turns[-1]
    if best is not None:
        index, turn = best
        title = f"Current best: turn {index + 1}, {turn.speedup:.3g}x"
        source = turn.source
    else:
        title = "Latest version (not correct yet)"
        source = next((t.source for t in reversed(turns) if t.source.strip()), "") or "# (no code was found)"
    if last.speedup is None:
        ask = "Your last version failed: fix what the feedback shows, keeping what worked, and make it fast."
    else:
        ask = "Write a faster version that stays correct; try an idea not listed under \"Already tried\"."
    return _render("optimizer", **_task_fields(task, correctness), best_title=title,
                   best_source=source.strip("\n"), trajectory=_trajectory(turns), tried=_tried(turns),
                   last_turn=str(len(turns)), feedback=last.feedback.strip() or "(none)", ask=ask)
