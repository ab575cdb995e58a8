"""Settings of the service (``[serve]``): which agent versions it serves, their A/B weights and
rollback, the engine, and the limits of a request."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from cudarl.config_base import _Section


class ServeConfig(_Section):
    """``cudarl serve`` / ``serve run deploy/serve.yaml``: the agents behind ``POST /v1/optimize``."""

    model: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    """Hub id or local folder of the base model (tokenizer included) every version's adapters sit on."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Agent versions by name: each a folder holding ``generator/`` and ``optimizer/`` adapters (a
    ``cudarl train`` checkpoint or a ``cudarl sft`` output), or "" for the base weights. Empty: one
    version, "base", on the base weights."""
    weights: dict[str, float] = Field(default_factory=dict)
    """A/B weights by version name (empty: equal). Changeable while serving (``PUT /v1/ab/weights``)."""
    rollback_below: float | None = Field(default=None, ge=0, le=1)
    """Take a version out of the split when its recent verified-kernel rate falls below this (None: never)."""
    rollback_min_requests: int = Field(default=20, ge=1)
    """Answers a version must have given (in its window) before it can be rolled back."""
    rollback_window: int = Field(default=100, ge=1)
    """The recent answers a version's verified-kernel rate is taken over."""
    engine: Literal["auto", "hf", "vllm"] = "auto"
    """Generation engine (auto: vLLM on a GPU when installed, else transformers)."""
    dtype: str = "auto"
    """Engine dtype ("auto": the model's own)."""
    agent_replicas: int = Field(default=1, ge=1, le=64)
    """Replicas holding an engine; each runs one request at a time, so this many run at once."""
    gpus_per_agent: float = Field(default=0.0, ge=0, le=1)
    """GPU share of each agent replica (0: on CPUs)."""
    max_new_tokens: int = Field(default=2048, ge=1)
    """Longest answer per turn, in tokens."""
    temperature: float = Field(default=0.7, gt=0, le=10)
    """Sampling temperature of the agents' turns."""
    target_speedup: float | None = Field(default=None, gt=0)
    """Stop a request's turns once a correct kernel reaches this speedup (None: use every turn)."""
    grace_s: float = Field(default=30.0, ge=0, le=600)
    """A request's hard limit is its budget's seconds plus this (a turn under way at the budget's
    end may finish); past it the answer is 504."""
    port: int = Field(default=8000, ge=1, le=65535)
    """HTTP port of ``cudarl serve``."""

    @model_validator(mode="after")
    def _weights_name_versions(self) -> Self:
        names = set(self.versions) or {"base"}
        unknown = sorted(set(self.weights) - names)
        if unknown:
            raise ValueError(f"serve.weights names {unknown}, which serve.versions does not hold ({sorted(names)})")
        if self.rollback_window < self.rollback_min_requests:
            raise ValueError("serve.rollback_window must be at least serve.rollback_min_requests")
        return self

    def split_weights(self) -> dict[str, float]:
        """The A/B weights of every version (equal where none are set)."""
        names = list(self.versions) or ["base"]
        return {name: self.weights.get(name, 0.0 if self.weights else 1.0) for name in names}
