"""A task: a KernelBench-format reference program plus the metadata the tester needs.

The reference is Python source defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``. Tolerances default by dtype (see ``CorrectnessConfig``); a task may set
its own when its op accumulates more rounding (long reductions, matmuls).
"""

from __future__ import annotations

import ast
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Tier = Literal["easy", "medium", "hard"]
DType = Literal["float32", "float16", "bfloat16"]


class TaskError(ValueError):
    """A task whose source or metadata is unusable; the message says which task and why."""


class Measured(BaseModel):
    """A reference solution's verdict figures, recorded in the suite's metadata."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speedup: float
    solution_ms: float
    reference_ms: float
    device: str
    date: str


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
    hidden: dict[str, int | float | bool | list[int] | tuple[int, ...]] = Field(default_factory=dict)
    """The second shape set, used only for hidden checks: values that replace the reference
    module's constants (e.g. ``{"N": 1000003}``) before ``get_init_inputs``/``get_inputs``."""
    measured: Measured | None = None
    """The suite's own solution as judged on a GPU (``cudarl tasks check --record``)."""

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
        if self.hidden:
            assigned = {t.id for node in tree.body if isinstance(node, ast.Assign)
                        for t in node.targets if isinstance(t, ast.Name)}
            unknown = sorted(set(self.hidden) - assigned)
            if unknown:
                raise TaskError(f"task {self.id}: hidden shapes name constants the reference does not define: "
                                f"{', '.join(unknown)}")
