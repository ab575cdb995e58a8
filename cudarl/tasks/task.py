"""A task: a KernelBench-format reference program plus the metadata the tester needs.

The reference is Python source defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``. Tolerances default by dtype (see ``CorrectnessConfig``); a task may set
its own when its op accumulates more rounding (long reductions, matmuls).
"""

from __future__ import annotations

import ast
from typing import Literal

from pydantic import BaseModel, ConfigDict

Tier = Literal["easy", "medium", "hard"]
DType = Literal["float32", "float16", "bfloat16"]


class TaskError(ValueError):
    """A task whose source or metadata is unusable; the message says which task and why."""


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    id: str
    """Unique name, used to match candidates to tasks."""
    source: str
    """The reference program (KernelBench format)."""
    tier: Tier = "medium"
    """Curriculum tier."""
    dtype: DType = "float32"
    """Dtype of the inputs and outputs; selects the default tolerance."""
    atol: float | None = None
    """Absolute tolerance; None: the config's default for ``dtype``."""
    rtol: float | None = None
    """Relative tolerance; None: the config's default for ``dtype``."""
    description: str = ""
    """One line for humans."""

    def tolerances(self, fp32_default: float, half_default: float) -> tuple[float, float]:
        """(atol, rtol) for this task."""
        default = fp32_default if self.dtype == "float32" else half_default
        return (
            self.atol if self.atol is not None else default,
            self.rtol if self.rtol is not None else default,
        )

    def validate_source(self) -> None:
        """Raise TaskError unless the source parses and defines the three required names."""
        try:
            tree = ast.parse(self.source)
        except SyntaxError as exc:
            raise TaskError(f"task {self.id}: reference does not parse: line {exc.lineno}: {exc.msg}") from exc
        names = {
            node.name
            for node in tree.body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef))
        }
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
        if missing:
            raise TaskError(f"task {self.id}: reference lacks {', '.join(missing)}")
