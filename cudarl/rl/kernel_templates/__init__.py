"""Parametrized nvrtc-format kernels for a few suite tasks: each task module lists its
``CHOICES`` (a name, the parameters, what a GPU should show and why) and renders one into the
Python source of a candidate. ``cudarl.rl.kernel_choices`` is the registry that the learning
loop and the tests use; the choices themselves are described there.

Why nvrtc: NVRTC builds a kernel in a fraction of a second without torch's headers (an inline
build takes tens of seconds), so every choice of every task compiles on a CPU-only machine in
seconds and a whole learning run fits one command on the GPU machine. The suite has nvrtc
solutions for these tasks (``cudarl/tasks/suite/solutions_nvrtc/``); the candidates follow them.

Parameters reach the CUDA source as ``#define`` lines at its top and the launch code as literal
numbers: every rendered source is a plain literal, as the tester's guard requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Expect = Literal["fast", "medium", "slow", "wrong"]


@dataclass(frozen=True)
class Choice:
    """One point of a task's grid."""

    name: str
    """Short and unique within the task; part of the candidate id."""
    family: str
    """Which kernel template renders it (the task module's ``render`` dispatches on it)."""
    params: Mapping[str, int] = field(default_factory=dict)
    """The template's parameters (written into the CUDA source as ``#define NAME value``)."""
    expect: Expect = "fast"
    """What a GPU should show: fast (near the best of the grid), medium, slow (clearly slower),
    wrong (fails the tester's correctness check, deterministically)."""
    why: str = ""
    """One line: what the choice does and why it is fast, slow or wrong."""


def defines(params: Mapping[str, int]) -> str:
    return "".join(f"#define {name} {int(value)}\n" for name, value in params.items())


def candidate_source(title: str, cuda: str, kernels: Mapping[str, str], model: str) -> str:
    """A whole candidate: the docstring, imports, the CUDA source, the kernels (Python name ->
    ``extern "C"`` name) and ``ModelNew`` (its text, given)."""
    made = "".join(f'{python} = kernel(SOURCE, "{name}")\n' for python, name in kernels.items())
    return (
        f'"""{title}"""\nimport torch\nimport torch.nn as nn\n\nfrom cudarl.nvrtc import i64, kernel\n\n'
        f'SOURCE = r"""\n{cuda.strip()}\n"""\n{made}\n\n{model.strip()}\n'
    )


def ceil_div(a: str, b: int) -> str:
    """Python text of ``ceil(a / b)`` for the launch code."""
    return f"(({a}) + {b - 1}) // {b}"
