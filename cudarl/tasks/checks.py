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


def _share_passing(candidate: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> float:
    finite = torch.isfinite(ref)
    close = (candidate - ref).abs() <= atol + rtol * ref.abs()
    return float((close | ~finite).float().mean())


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
        zeros = _share_passing(torch.zeros_like(out), out, atol, rtol)
        if zeros >= PASS_SHARE_LIMIT:
            reasons.append(f"{label} is nearly zero: an all-zeros result passes on {zeros:.1%} of elements")
            continue
        if out.numel() > 1:
            finite = torch.isfinite(out)
            mean = float(out[finite].mean()) if bool(finite.any()) else 0.0
            constant = _share_passing(torch.full_like(out, mean), out, atol, rtol)
            if constant >= PASS_SHARE_LIMIT:
                reasons.append(f"{label} is nearly constant: its mean passes on {constant:.1%} of elements")
                continue
        if other is not None and out.shape == other.shape:
            same = _share_passing(other, out, atol, rtol)
            if same >= PASS_SHARE_LIMIT:
                reasons.append(f"{label} barely depends on the inputs: another seed's result passes on "
                               f"{same:.1%} of elements")
    return reasons
