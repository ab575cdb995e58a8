"""GeneratorPolicy / OptimizerPolicy: one policy class holding a generation engine, in two roles.

Why one class: both roles generate, score and take weights the same way; the role only names
the actor and its adapter. Two layouts: one actor per role, each with its own model (``role``
"generator" or "optimizer"), or one actor serving both roles over one base model with one LoRA
adapter each (``role`` "both", ``lora`` set: half the GPU memory, and the roles take turns on
the engine). With ``lora`` set, every call names its role and runs with that role's adapter;
weight updates then go to the role's adapter (the trainer's peft state dict). The engine lives
in the actor so rollouts run where the weights are; verdicts and trajectories travel as object
refs. GPU share: ``PolicySpec.gpu_share`` is a fractional ``num_gpus`` (on one GPU the policies,
the bench workers and the trainer share it; an actor holding a whole GPU would deadlock Ray
Train waiting for one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import ray

from cudarl.rollout.engine import EngineName, Generation, LoraSettings, Probe, SamplingSettings, WeightSync
from cudarl.rollout.loading import load_engine

Role = Literal["generator", "optimizer"]
ROLES: tuple[Role, ...] = ("generator", "optimizer")


@dataclass(frozen=True)
class PolicySpec:
    """What a policy actor loads."""

    role: Literal["generator", "optimizer", "both"]
    """The role served; "both" shares one base model between the roles (needs ``lora``)."""
    model: str
    """Hub name or local folder of the model (the real loading code)."""
    engine: EngineName = "auto"
    dtype: str = "auto"
    gpu_share: float = 0.0
    """Fraction of a GPU reserved for this actor (0 on a CPU-only machine)."""
    lora: LoraSettings | None = None
    """One LoRA adapter per role served, named after the role (None: the roles use the base weights)."""
    vllm: dict | None = None
    """``VLLMSettings`` fields for the vLLM engine (memory share, CUDA graphs, context length)."""
    adapters: dict[str, str] | None = None
    """Warm-start adapter folders by role (``cudarl sft`` writes ``<out>/<role>``), loaded at start
    as version 1 through the checked update path; ``lora`` defaults to their shape."""

    def __post_init__(self) -> None:
        if self.role not in (*ROLES, "both"):
            raise ValueError(f"role must be 'generator', 'optimizer' or 'both', got {self.role!r}")
        if not 0.0 <= self.gpu_share <= 1.0:
            raise ValueError(f"gpu_share must be in [0, 1], got {self.gpu_share}")
        if self.adapters:
            unknown = [role for role in self.adapters if role not in self.roles]
            if unknown:
                raise ValueError(f"adapters for {', '.join(unknown)}: this policy serves {', '.join(self.roles)}")
            if self.lora is None:
                from pathlib import Path

                from cudarl.rollout.adapters import read_adapter_settings

                object.__setattr__(self, "lora", read_adapter_settings(Path(next(iter(self.adapters.values())))))
        if self.role == "both" and self.lora is None:
            raise ValueError("role 'both' shares one base model between the roles: it needs lora settings "
                             "(one adapter per role)")
        if isinstance(self.lora, dict):  # from asdict() on the way into the actor
            object.__setattr__(self, "lora", LoraSettings(**{**self.lora,
                                                            "target_modules": tuple(self.lora["target_modules"])}))

    @property
    def roles(self) -> tuple[Role, ...]:
        return ROLES if self.role == "both" else (self.role,)


class Policy:
    """Roles' engine behind Ray: generate, score, update weights (verified)."""

    def __init__(self, spec: dict) -> None:
        self.spec = PolicySpec(**spec)
        device = "cuda" if self.spec.gpu_share > 0 else "cpu"
        self.engine = load_engine(self.spec.model, self.spec.engine, self.spec.dtype, device,
                                  lora=self.spec.lora is not None, vllm_settings=self.spec.vllm)
        self._channel = None  # the weight channel to the update workers, opened by the first receive
        if self.spec.lora is not None:
            for role in self.spec.roles:
                self.engine.add_adapter(role, self.spec.lora)
        for role, folder in (self.spec.adapters or {}).items():
            self._load_warm_start(role, folder)

    def _load_warm_start(self, role: str, folder: str) -> None:
        from pathlib import Path

        from cudarl.rollout.adapters import read_adapter_folder

        settings, weights = read_adapter_folder(Path(folder))
        mine = self.spec.lora
        if not settings.same_shape(mine):
            raise ValueError(f"{folder}: rank {settings.rank}, alpha {settings.alpha} over "
                             f"{', '.join(settings.target_modules)}; this policy's adapters are rank {mine.rank}, "
                             f"alpha {mine.alpha} over {', '.join(mine.target_modules)}")
        self.engine.update_weights(weights, version=1, adapter=role)

    def _adapter(self, role: Role | None) -> str | None:
        role = role or (self.spec.roles[0] if len(self.spec.roles) == 1 else None)
        if role not in self.spec.roles:
            raise ValueError(f"this policy serves {', '.join(self.spec.roles)}; name one of them, got {role!r}")
        return role if self.spec.lora is not None else None

    def ready(self) -> dict:
        versions = {role: self.engine.version_of(self._adapter(role)) for role in self.spec.roles}
        return {"roles": list(self.spec.roles), "model": self.spec.model, "adapters": list(self.engine.adapters),
                "weights_versions": versions}

    def version_of(self, role: Role | None = None) -> int:
        return self.engine.version_of(self._adapter(role))

    def generate(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings,
                 role: Role | None = None) -> list[Generation]:
        return self.engine.generate(prompts, settings, adapter=self._adapter(role))

    def score(self, token_ids: Sequence[int], prompt_length: int, role: Role | None = None) -> list[float]:
        return self.engine.score(token_ids, prompt_length, adapter=self._adapter(role))

    def update_weights(self, weights: Mapping, version: int, probe: Probe | None = None,
                       role: Role | None = None) -> WeightSync:
        """The role's adapter (with ``lora``) or the model's weights, verified by the probe."""
        return self.engine.update_weights(weights, version, probe, adapter=self._adapter(role))

    def device_uuid(self) -> str | None:
        """The UUID of the engine's GPU (None on a CPU): a weight channel needs the update worker
        on another GPU."""
        from cudarl.rl.weight_channel import device_uuid

        return device_uuid() if self.spec.gpu_share > 0 else None

    def receive_weights(self, address, manifest, version: int, probes: dict) -> dict:
        """Weights broadcast by the update workers' rank 0 over the channel at ``address``
        (``cudarl.rl.weight_channel``; the sender is told to send at the same moment), loaded into
        each role's adapter (group "model": the base weights) and checked on ``probes[group]``;
        the syncs by group."""
        from cudarl.rl.weight_channel import WeightChannel, adapter_of

        if self._channel is None or self._channel.address.key != address.key:
            if self._channel is not None:
                self._channel.close()
            self._channel = WeightChannel(address, 1, "cuda" if self.spec.gpu_share > 0 else "cpu")
        groups = self._channel.receive(manifest)
        return {group: self.update_weights(tensors, version, probes.get(group), adapter_of(group))
                for group, tensors in groups.items()}


PolicyActor = ray.remote(num_cpus=1, max_restarts=0)(Policy)


def start_policy(spec: PolicySpec):
    """The actor (``cudarl-generator``, ``cudarl-optimizer`` or ``cudarl-policy``), with its GPU share."""
    name = "cudarl-policy" if spec.role == "both" else f"cudarl-{spec.role}"
    return PolicyActor.options(name=name, num_gpus=spec.gpu_share).remote(asdict(spec))


def generator_policy(model: str, **settings) -> object:
    return start_policy(PolicySpec(role="generator", model=model, **settings))


def optimizer_policy(model: str, **settings) -> object:
    return start_policy(PolicySpec(role="optimizer", model=model, **settings))


def shared_policy(model: str, lora: LoraSettings | None = None, **settings) -> object:
    """Both roles in one actor over one base model, one LoRA adapter each."""
    return start_policy(PolicySpec(role="both", model=model, lora=lora or LoraSettings(), **settings))
