"""GeneratorPolicy / OptimizerPolicy: one policy class holding a generation engine, in two roles.

Why one class: both roles generate, score and take weights the same way; the role only names
the actor and its adapter (one base model with one adapter per role, or two models). The engine
lives in the actor so rollouts run where the weights are; verdicts and trajectories travel as
object refs. GPU share: ``PolicySpec.gpu_share`` is a fractional ``num_gpus`` (on one GPU the
policies, the bench workers and the trainer share it; an actor holding a whole GPU would
deadlock Ray Train waiting for one). Not covered yet: per-role LoRA adapters, vLLM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import ray

from cudarl.rollout.engine import EngineName, Generation, Probe, SamplingSettings, WeightSync
from cudarl.rollout.loading import load_engine


@dataclass(frozen=True)
class PolicySpec:
    """What a policy actor loads."""

    role: Literal["generator", "optimizer"]
    model: str
    """Hub name or local folder of the model (the real loading code)."""
    engine: EngineName = "auto"
    dtype: str = "auto"
    gpu_share: float = 0.0
    """Fraction of a GPU reserved for this actor (0 on a CPU-only machine)."""

    def __post_init__(self) -> None:
        if self.role not in ("generator", "optimizer"):
            raise ValueError(f"role must be 'generator' or 'optimizer', got {self.role!r}")
        if not 0.0 <= self.gpu_share <= 1.0:
            raise ValueError(f"gpu_share must be in [0, 1], got {self.gpu_share}")


class Policy:
    """A role's engine behind Ray: generate, score, update weights (verified)."""

    def __init__(self, spec: dict) -> None:
        self.spec = PolicySpec(**spec)
        device = "cuda" if self.spec.gpu_share > 0 else "cpu"
        self.engine = load_engine(self.spec.model, self.spec.engine, self.spec.dtype, device)

    def ready(self) -> dict:
        return {"role": self.spec.role, "model": self.spec.model, "weights_version": self.engine.weights_version}

    def generate(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings) -> list[Generation]:
        return self.engine.generate(prompts, settings)

    def score(self, token_ids: Sequence[int], prompt_length: int) -> list[float]:
        return self.engine.score(token_ids, prompt_length)

    def update_weights(self, weights: Mapping, version: int, probe: Probe | None = None) -> WeightSync:
        return self.engine.update_weights(weights, version, probe)


PolicyActor = ray.remote(num_cpus=1, max_restarts=0)(Policy)


def start_policy(spec: PolicySpec):
    """The role's actor (``cudarl-generator`` / ``cudarl-optimizer``), with its GPU share."""
    return PolicyActor.options(name=f"cudarl-{spec.role}", num_gpus=spec.gpu_share).remote(asdict(spec))


def generator_policy(model: str, **settings) -> object:
    return start_policy(PolicySpec(role="generator", model=model, **settings))


def optimizer_policy(model: str, **settings) -> object:
    return start_policy(PolicySpec(role="optimizer", model=model, **settings))
