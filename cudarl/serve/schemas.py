"""The records of ``POST /v1/optimize``: what a client sends and what it gets back.

Why here, apart from the app: the limits (program size, turns, seconds) are the service's contract;
checking them in one typed record gives every bad request the same one-line 4xx answer before any
agent or tester work starts, and lets the checks be tested without a server.

Covered: the request (a KernelBench-format reference program or a suite task id, a budget, an
optional client key for the A/B split's stickiness) and its checks, the task it names, the answer's
fields. Not covered: running the turns (the app, not built yet).
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cudarl.tasks.task import Task, TaskError

MAX_PROGRAM_BYTES = 64 * 1024
"""Largest reference program accepted (KernelBench's largest level-3 programs are under 10 KB)."""


class RequestError(ValueError):
    """A request the service refuses (answered 4xx with this message)."""


class Budget(BaseModel):
    """What one request may spend."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    turns: int = Field(default=3, ge=1, le=16)
    """Agent turns: the generator's first, then the optimizer's."""
    seconds: float = Field(default=300.0, gt=0, le=1800)
    """Wall time for the whole request; turns not started by then are skipped and the best kernel so far returned."""


class OptimizeRequest(BaseModel):
    """``POST /v1/optimize``: one reference program or one task id, and a budget."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    reference: str | None = Field(default=None, max_length=MAX_PROGRAM_BYTES)
    """A KernelBench-format program: ``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``."""
    task_id: str | None = Field(default=None, max_length=200)
    """A task of the service's suite instead of a program."""
    budget: Budget = Field(default_factory=Budget)
    client_key: str | None = Field(default=None, max_length=200)
    """Keeps this client on one agent version in an A/B split (none: a random draw by the weights)."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.reference is None) == (self.task_id is None):
            raise ValueError("give exactly one of 'reference' (a program) or 'task_id'")
        return self

    def task(self, suite: dict[str, Task]) -> Task:
        """The task to optimize: the named suite task, or one made from the program (checked:
        it parses and defines the three names). ``RequestError`` with the reason otherwise."""
        if self.task_id is not None:
            if self.task_id not in suite:
                known = ", ".join(sorted(suite)[:8]) + (", ..." if len(suite) > 8 else "")
                raise RequestError(f"unknown task_id {self.task_id!r} (known: {known})")
            return suite[self.task_id]
        if len(self.reference.encode()) > MAX_PROGRAM_BYTES:
            raise RequestError(f"the reference program is {len(self.reference.encode())} bytes; at most "
                               f"{MAX_PROGRAM_BYTES} are accepted")
        task = Task(id="request", source=self.reference, description="a program sent to /v1/optimize")
        try:
            task.validate_source()
        except TaskError as exc:
            raise RequestError(str(exc).removeprefix("task request: ")) from exc
        return task


class TurnRecord(BaseModel):
    """One agent turn of a request, as the client sees it."""

    turn: int
    role: str
    outcome: str
    speedup: float | None = None
    reasons: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class OptimizeAnswer(BaseModel):
    """The answer: the best verified kernel (None when no turn produced one), its verdict, the
    turns, and the agent version that served the request."""

    request_id: str
    """Unique per answer (a client that sees one twice was answered twice)."""
    task_id: str
    version: str
    """The agent version (A/B arm) that served this request."""
    kernel: str | None
    verdict: dict | None
    """The best kernel's verdict as the tester wrote it (speedup, correctness evidence, resources)."""
    turns: list[TurnRecord]
    budget_left_s: float
    stopped_by: str
    """"success" (the target reached), "turns" or "time"."""
