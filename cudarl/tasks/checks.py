"""Rejecting degenerate tasks: those a wrong kernel could pass.

A task is degenerate when, at its own tolerance, an all-zeros output would pass (nearly zero),
a constant output (the reference's mean) would pass (nearly constant), or the output does not
depend on the inputs (two different seeds give the same result). Each check runs the reference
on the CPU at the task's default shapes (and its hidden shapes when ``hidden=True``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from cudarl.files import import_source
from cudarl.tasks.task import Task

SMALL_OUTPUT = 1 << 16
PASS_SHARE_LIMIT = 0.99  # a trivial output passing on this share of elements is "passing"


def _load(task: Task):
    """The task's reference as a fresh module (a real file, so tracebacks show its lines)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reference.py"
        path.write_text(task.source)
        return import_source(path, f"cudarl_check_{abs(hash(task.id))}")


def _outputs(module, seed: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval()
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model(*module.get_inputs())
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.detach().float() for o in items if isinstance(o, torch.Tensor)]


class _Passing:
    """The share of elements a stand-in output passes on against one reference output.

    The tolerance and the finite mask are computed once per output, and an all-finite output
    (the usual case) is counted in four passes over its elements: at the default shapes the
    outputs hold up to 67M elements, where these checks, not the reference, took most of the time.
    """

    def __init__(self, ref: torch.Tensor, atol: float, rtol: float) -> None:
        self.ref = ref
        self.tolerance = ref.abs().mul_(rtol).add_(atol)
        finite = torch.isfinite(ref)
        self.nonfinite = None if bool(finite.all()) else ~finite  # those elements pass whatever the stand-in is

    def share(self, candidate: torch.Tensor | float) -> float:
        """``candidate``: an output of the reference's shape, or one value for every element."""
        close = (self.ref - candidate).abs_().le_(self.tolerance)
        if self.nonfinite is not None:
            close = close.bool() | self.nonfinite
        return int(torch.count_nonzero(close)) / self.ref.numel()

    def mean(self) -> float:
        """The mean of the finite elements (0 where none is)."""
        if self.nonfinite is None:
            return float(self.ref.mean())
        finite = ~self.nonfinite
        return float(self.ref[finite].mean()) if bool(finite.any()) else 0.0


def degenerate_reasons(task: Task, atol: float, rtol: float, hidden: bool = False,
                       check_inputs: bool | None = True) -> list[str]:
    """Why ``task`` is degenerate at (atol, rtol); empty when it is fine.

    ``hidden``: use the hidden shape set. ``check_inputs``: also run a second seed and flag an
    output that (at the tolerance) does not depend on the inputs, which is how a scalar loss that
    is nearly the same for every random input shows up; None: only when the output is small
    (under ``SMALL_OUTPUT`` elements), where that failure lives, saving a forward pass."""
    module = _load(task)
    for name, value in (task.hidden.items() if hidden else ()):
        setattr(module, name, value)
    first = _outputs(module, 1)
    if not first:
        return ["the reference returns no tensor"]
    if check_inputs is None:
        check_inputs = sum(o.numel() for o in first) < SMALL_OUTPUT
    second = _outputs(module, 2) if check_inputs else [None] * len(first)
    reasons = []
    for index, (out, other) in enumerate(zip(first, second)):
        label = f"output {index}" if len(first) > 1 else "output"
        if out.numel() == 0:
            reasons.append(f"{label} is empty")
            continue
        passing = _Passing(out, atol, rtol)
        zeros = passing.share(0.0)
        if zeros >= PASS_SHARE_LIMIT:
            reasons.append(f"{label} is nearly zero: an all-zeros result passes on {zeros:.1%} of elements")
            continue
        if out.numel() > 1:
            constant = passing.share(passing.mean())
            if constant >= PASS_SHARE_LIMIT:
                reasons.append(f"{label} is nearly constant: its mean passes on {constant:.1%} of elements")
                continue
        if other is not None and out.shape == other.shape:
            same = passing.share(other)
            if same >= PASS_SHARE_LIMIT:
                reasons.append(f"{label} barely depends on the inputs: another seed's result passes on "
                               f"{same:.1%} of elements")
    return reasons
