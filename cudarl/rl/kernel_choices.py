"""Kernel choices: a small grid of parametrized CUDA kernels per suite task, so that a policy's
answer can be a pick among them (``decode``) and the tester's verdict on the rendered candidate
(``render``) can reward it. Some choices are clearly faster than others, some slower, and a few
deliberately wrong in ways the tester's correctness check always catches (a tail never written,
a partial sum dropped, K % 32 terms skipped at the hidden shapes): learning in the kernel domain
is then measurable without a pretrained model.

Grids (``describe()`` prints them with what a GPU should show and why): ``vector_add`` (block
size, float4, vectors per thread, grid-stride over a fixed grid, uncoalesced chunks),
``row_sum`` (a thread, warp or block per row, float4, tree or shuffle reduction), ``matmul``
(no staging, shared-memory tiles, register blocking). The templates are in
``cudarl.rl.kernel_templates``; candidates are in the nvrtc format.

Covered: rendering every choice into a candidate the tester accepts and compiles (tested with
nvcc here, ``tests/integration/test_kernel_choices_compile.py``). Only a GPU shows the speeds
and the failures (``tests/gpu/test_kernel_choices_gpu.py``); the expectations written here are
estimates until it has run.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from types import ModuleType

from cudarl.rl.kernel_templates import Choice, matmul, row_sum, vector_add
from cudarl.tasks.candidate import Candidate

__all__ = ["Choice", "TASKS", "choices", "decode", "describe", "render", "render_all"]

_MODULES: dict[str, ModuleType] = {module.TASK: module for module in (vector_add, row_sum, matmul)}

TASKS: tuple[str, ...] = tuple(_MODULES)
"""The tasks with a grid, in a fixed order."""


def choices(task_id: str) -> tuple[Choice, ...]:
    """The task's grid, in index order; ``KeyError`` naming the known tasks otherwise."""
    if task_id not in _MODULES:
        raise KeyError(f"no kernel choices for task {task_id!r}; known: {', '.join(TASKS)}")
    return _MODULES[task_id].CHOICES


def candidate_id(task_id: str, index: int) -> str:
    return f"{task_id}/choice-{index:02d}-{choices(task_id)[index].name}"


def render(task_id: str, index: int) -> Candidate:
    """Choice ``index`` of ``task_id`` as a candidate (nvrtc format); the same index always gives
    the same source, so identical picks share the tester's compile and verdict caches."""
    grid = choices(task_id)
    if not 0 <= index < len(grid):
        raise IndexError(f"{task_id} has {len(grid)} choices (0 to {len(grid) - 1}), not {index}")
    render_source: Callable[[Choice], str] = _MODULES[task_id].render
    return Candidate(task_id=task_id, id=candidate_id(task_id, index), source=render_source(grid[index]))


def render_all(task_ids: Sequence[str] = TASKS) -> list[Candidate]:
    """Every choice of every task in ``task_ids``, task by task in index order."""
    return [render(task_id, index) for task_id in task_ids for index in range(len(choices(task_id)))]


def decode(token_ids: Sequence[int], count: int, task_id: str = "") -> int:
    """The choice a response picks: its first token id modulo the number of choices, through a
    fixed shuffle of the choices per task (``task_id``; none when empty). Why the first token
    alone: the whole answer is one decision, so one token carries it and gets the whole
    advantage; later tokens (if any are sampled) are ignored. Why a shuffle per task: the same
    token then names unrelated choices in different tasks, so a policy cannot do well on every
    task with one token for all and must tell the tasks apart (the grids list their choices in
    similar orders, fast ones in the middle). An empty response picks what token 0 would."""
    if count < 1:
        raise ValueError(f"need at least one choice, got {count}")
    index = token_ids[0] % count if token_ids else 0
    return _shuffle(task_id, count)[index] if task_id else index


@functools.cache
def _shuffle(task_id: str, count: int) -> tuple[int, ...]:
    order = list(range(count))
    random.Random(f"kernel-choices:{task_id}").shuffle(order)
    return tuple(order)


def describe(task_ids: Sequence[str] = TASKS) -> str:
    """The grids as text: index, name, expectation, why."""
    lines = []
    for task_id in task_ids:
        lines.append(f"{task_id}:")
        for index, choice in enumerate(choices(task_id)):
            lines.append(f"  {index:2d} {choice.name:34s} {choice.expect:6s} {choice.why}")
    return "\n".join(lines)
