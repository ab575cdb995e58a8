"""Warm-start examples: (prompt, answer) pairs for the two roles, in the RL phase's own words.

Every prompt comes from the templates the RL episodes render (``agents.prompts``): the generator
sees ``generator_prompt(task)``, the optimizer sees ``optimizer_prompt(task, turns)`` with one
earlier turn, and every answer is what the parser expects (``Strategy: ...`` then one python
block). So the warm start teaches the conversation the policy will see, not a look-alike.

Sources: the built-in suite's solutions (inline and nvrtc; generator pairs), an archive of
generated kernels (``tasks.sakana``: correct rows as generator pairs, faster first; for the
optimizer, a slower correct kernel of a task with its recorded timing as feedback, answered by a
faster correct one), and JSONL files of ready pairs. Not covered: (naive, optimized) pairs from the
suite (it holds one solution per task), and kernels of the archive that fail to convert
(``archive_candidates``): those are counted, with their reasons, in the caller's report.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cudarl.agents.parsing import parse_answer
from cudarl.agents.prompts import TurnSummary, generator_prompt, optimizer_prompt, system_prompt
from cudarl.sft.archive_candidates import NotConvertible, archive_candidate
from cudarl.tasks.report import LoadReport
from cudarl.tasks.sakana import KernelExample
from cudarl.tasks.task import Task

Role = Literal["generator", "optimizer"]
ROLES: tuple[Role, ...] = ("generator", "optimizer")


@dataclass(frozen=True)
class SftExample:
    """One supervised pair: what the RL phase would show (system and user text) and the answer."""

    role: Role
    task_id: str
    system: str
    user: str
    answer: str  # the assistant's text: "Strategy: ..." and one python block
    candidate: str  # the answer's code alone (for the guard and the duplicate check)
    origin: str  # where it came from (statistics, messages)


def answer_text(strategy: str, source: str) -> str:
    """An answer in the layout the system prompt asks for and the parser reads."""
    strategy = " ".join(strategy.split()) or "a CUDA kernel for the task"
    return f"Strategy: {strategy}\n\n```python\n{source.strip()}\n```\n"


def _docstring_strategy(source: str, fallback: str) -> str:
    try:
        docstring = ast.get_docstring(ast.parse(source)) or ""
    except SyntaxError:
        docstring = ""
    first = docstring.strip().split("\n\n")[0]
    return " ".join(first.split())[:200] or fallback


def _kernel_words(name: str) -> str:
    return " ".join(part for part in name.replace("-", "_").split("_") if part and not part.isdigit()) or name


def suite_examples(tasks: Iterable[Task]) -> list[SftExample]:
    """Generator pairs from the suite's honest solutions, both formats where both exist."""
    from cudarl.tasks.builtin import suite_solutions

    by_id = {task.id: task for task in tasks}
    examples = []
    for form in ("inline", "nvrtc"):
        for candidate in suite_solutions(set(by_id), form=form):
            task = by_id[candidate.task_id]
            strategy = _docstring_strategy(candidate.source, f"a hand-written {form} kernel for {task.id}")
            examples.append(SftExample(role="generator", task_id=task.id, system=system_prompt(),
                                       user=generator_prompt(task), answer=answer_text(strategy, candidate.source),
                                       candidate=candidate.source, origin=f"suite:{candidate.id}"))
    return examples


def _speed(kernel: KernelExample) -> float:
    return kernel.speedup_native if kernel.speedup_native is not None else 0.0


def _archive_feedback(kernel: KernelExample) -> str:
    """The feedback the optimizer would have read for ``kernel``, from what the archive recorded
    (the header and timing lines in the RL feedback's wording; no figure is made up)."""
    from cudarl.agents.feedback import feedback_text
    from cudarl.tester.verdict import Outcome, Stage, Verdict

    passed = Verdict(task_id=kernel.task_id, candidate_id=kernel.kernel_name, candidate_hash="", stage=Stage.DONE,
                     outcome=Outcome.PASSED)
    lines = [feedback_text(passed)]  # the header a judged turn shows, worded by the same code
    if kernel.speedup_native is not None:
        lines.append(f"Timing: speedup {kernel.speedup_native:.3g}x over the PyTorch reference "
                     "(recorded by the archive)")
    return "\n".join(lines)


def archive_examples(tasks: Iterable[Task], kernels: Iterable[KernelExample], report: LoadReport,
                     per_task: int = 4, pairs_per_task: int = 4, min_gain: float = 1.05) -> list[SftExample]:
    """Generator pairs (the ``per_task`` fastest correct kernels of each task) and optimizer pairs
    (up to ``pairs_per_task`` of each task: a correct kernel, answered by one at least
    ``min_gain`` times faster). Kernels that do not convert are skipped and counted in ``report``."""
    by_id = {task.id: task for task in tasks}
    converted: dict[str, list[tuple[KernelExample, str]]] = defaultdict(list)
    for kernel in kernels:
        if not kernel.correct or kernel.task_id not in by_id:
            continue
        try:
            source = archive_candidate(kernel.cuda_code, kernel.functional_code, kernel.kernel_name)
        except NotConvertible as exc:
            report.skip(f"{kernel.task_id}:{kernel.kernel_name}", f"not convertible: {exc}")
            continue
        converted[kernel.task_id].append((kernel, source))
    examples: list[SftExample] = []
    for task_id, rows in sorted(converted.items()):
        task = by_id[task_id]
        rows.sort(key=lambda row: _speed(row[0]), reverse=True)
        for kernel, source in rows[:per_task]:
            examples.append(SftExample(role="generator", task_id=task_id, system=system_prompt(),
                                       user=generator_prompt(task),
                                       answer=answer_text(_kernel_words(kernel.kernel_name), source),
                                       candidate=source, origin=f"archive:{task_id}:{kernel.kernel_name}"))
        made = 0
        for faster, faster_source in rows:
            if made >= pairs_per_task:
                break
            for slower, slower_source in reversed(rows):  # the slowest first: the largest gain to learn
                if _speed(slower) <= 0 or _speed(faster) < _speed(slower) * min_gain:
                    continue
                turn = TurnSummary(source=slower_source, feedback=_archive_feedback(slower), speedup=_speed(slower),
                                   strategy=_kernel_words(slower.kernel_name), outcome="passed")
                examples.append(SftExample(
                    role="optimizer", task_id=task_id, system=system_prompt(), user=optimizer_prompt(task, [turn]),
                    answer=answer_text(_kernel_words(faster.kernel_name), faster_source), candidate=faster_source,
                    origin=f"archive:{task_id}:{slower.kernel_name}->{faster.kernel_name}"))
                made += 1
                break
    return examples


def jsonl_examples(path: Path, tasks: Iterable[Task], report: LoadReport) -> list[SftExample]:
    """Pairs from a JSONL file, one object a line: ``task_id``, ``answer`` (the candidate module,
    or a whole answer with its python block), optional ``role`` (default generator) and
    ``strategy``. A line that is not JSON, names an unknown task or role, or has no answer is
    skipped and counted with the file and line. Optimizer lines need ``previous`` (the earlier
    candidate) and may give ``previous_feedback``, ``previous_speedup``, ``previous_strategy`` and
    ``previous_outcome`` (the verdict's; default "passed" with a speedup, else none): with all of
    them the prompt is the one an episode builds for that turn (``summarize_turn``)."""
    by_id = {task.id: task for task in tasks}
    examples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        report.seen += 1
        place = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            report.skip(place, f"not JSON: {exc.msg}")
            continue
        if not isinstance(row, dict) or row.get("task_id") not in by_id or not str(row.get("answer", "")).strip():
            report.skip(place, "needs an object with a known task_id and a non-empty answer")
            continue
        role = row.get("role", "generator")
        if role not in ROLES:
            report.skip(place, f"role must be generator or optimizer, got {role!r}")
            continue
        task = by_id[row["task_id"]]
        text = str(row["answer"])
        answer = text if "```" in text else answer_text(str(row.get("strategy", "")), text)
        parsed = parse_answer(answer)
        if not parsed.ok:
            report.skip(place, f"the answer has no usable candidate: {parsed.problem}")
            continue
        source = parsed.source
        if role == "generator":
            user = generator_prompt(task)
        elif str(row.get("previous", "")).strip():
            speedup = row.get("previous_speedup")
            outcome = row.get("previous_outcome", "passed" if speedup is not None else "")
            user = optimizer_prompt(task, [TurnSummary(source=str(row["previous"]),
                                                       feedback=str(row.get("previous_feedback", "")),
                                                       speedup=float(speedup) if speedup is not None else None,
                                                       strategy=str(row.get("previous_strategy", "")),
                                                       outcome=str(outcome))])
        else:
            report.skip(place, "an optimizer line needs previous (the earlier candidate)")
            continue
        examples.append(SftExample(role=role, task_id=task.id, system=system_prompt(), user=user, answer=answer,
                                   candidate=source, origin=place))
        report.kept += 1
    return examples
