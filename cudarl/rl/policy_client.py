"""The rollout engine of an RL run, in a policy actor (``actors/policy.py``), behind the engine
interface the episode loop takes (``generate``, ``score``, ``version_of``, ``update_weights``).

Why an actor: Ray places it by its GPU share, so the engine runs on a GPU node (under ``ray job
submit`` the driver runs on the head node, which often has none), it shares one GPU with the
update and bench workers by fractions, and its death is a Ray error the driver can recover from
instead of the driver's own crash. Weights reach it as object references straight from the update
worker that put them in the object store; the driver does not copy them.

Covered: start (refused at once, with the numbers, when the cluster's free resources cannot hold
it), calls with a time limit (a silent actor is a ``TimeoutError``), and ``restart``: a new actor
brought back to the last weights of every adapter, each checked on the probe it was last synced
with, so a policy killed mid-step costs that step's retry, not the run. Not covered: several
engine replicas (one actor serves both roles). Weights may also come over a weight channel
(``receive_weights_ref``; ``cudarl.rl.weight_channel``), the object store's copy still kept for a
restart.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from cudarl.rollout.engine import Generation, LoraSettings, Probe, SamplingSettings, WeightSync


class PolicyUnavailable(RuntimeError):
    """The policy actor could not be started (it does not fit, or it did not come up in time)."""


class PolicyClient:
    """One policy actor serving the run's roles, used as a rollout engine."""

    def __init__(self, spec, cpus: float = 1.0, timeout_s: float = 1800.0, wait: bool = True) -> None:
        """``spec``: the ``PolicySpec`` the actor loads (and reloads on ``restart``). ``wait=False``:
        return as soon as the actor is placed, so that the caller starts other workers while its
        engine loads (a run's update workers: both import torch for tens of seconds);
        ``wait_ready`` then says whether it loaded."""
        self.spec, self.cpus, self.timeout_s = spec, cpus, timeout_s
        self.incarnation = 0
        self.run_id = uuid.uuid4().hex[:8]  # names stay unique while a killed actor's name is still held
        self.dead = False
        self._synced: dict[str | None, tuple[Any, int, Probe | None]] = {}  # adapter -> last weights, version, probe
        self._ready_ref = None
        self._start(wait)

    @property
    def name(self) -> str:
        """The actor's name in the run's namespace: ``cudarl-policy-<client>-<incarnation>`` (a new
        one per client and restart: Ray may hold a dead actor's name a while)."""
        return f"cudarl-policy-{self.run_id}-{self.incarnation}"

    def _needs(self) -> dict[str, float]:
        return {"CPU": self.cpus, **({"GPU": self.spec.gpu_share} if self.spec.gpu_share else {})}

    def _start(self, wait: bool = True) -> None:
        from actors.policy import PolicyActor
        from cudarl.rl.group import wait_until_fits

        wait_until_fits(1, self._needs(), what="the policy actor needs", error=PolicyUnavailable,
                        advice="lower train.policy_gpu_share or train.policy_cpus, or give the cluster more")
        self.incarnation += 1
        self.actor = PolicyActor.options(name=self.name, num_cpus=self.cpus, num_gpus=self.spec.gpu_share).remote(
            asdict(self.spec))
        self._ready_ref = self.actor.ready.remote()
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the actor's engine has loaded (at once if it has); ``PolicyUnavailable``, in one
        line, if it cannot."""
        import ray
        import ray.exceptions

        if self._ready_ref is None:
            return
        try:
            ready = self._get(self._ready_ref, "to start")
        except TimeoutError as exc:
            ray.kill(self.actor, no_restart=True)
            raise PolicyUnavailable(str(exc)) from exc
        except ray.exceptions.RayActorError as exc:  # its engine failed to load: say why, in one line
            cause = str(exc.__cause__ or exc).strip().splitlines()
            raise PolicyUnavailable(f"the policy actor failed to start: {cause[-1] if cause else 'no reason given'}") \
                from exc
        self.dead = False
        self._adapters: tuple[str, ...] = tuple(ready["adapters"])
        self._ready_ref = None

    @property
    def adapters(self) -> tuple[str, ...]:
        """The adapters the actor holds (known once it has loaded)."""
        self.wait_ready()
        return self._adapters

    def _get(self, ref, doing: str):
        import ray
        import ray.exceptions

        try:
            return ray.get(ref, timeout=self.timeout_s)
        except ray.exceptions.GetTimeoutError as exc:
            self.dead = True  # a silent actor is as good as dead: the retry starts another
            raise TimeoutError(f"the policy actor took more than {self.timeout_s:g} s {doing} "
                               "(train.policy_timeout_s)") from exc
        except ray.exceptions.RayActorError:
            self.dead = True
            raise

    def restart(self) -> None:
        """A new actor in place of a dead or silent one, back on the last synced weights (each
        adapter checked on its last probe)."""
        import ray

        ray.kill(self.actor, no_restart=True)
        print(f"the policy actor {self.name} is gone; starting another and restoring its weights",
              file=sys.stderr, flush=True)
        self._start()  # once the killed actor's share is back
        for adapter, (weights, version, probe) in self._synced.items():
            self.update_weights(weights, version, probe, adapter)

    def stop(self) -> None:
        import ray

        ray.kill(self.actor, no_restart=True)

    def add_adapter(self, name: str, settings: LoraSettings) -> None:
        """The actor makes its adapters from its spec; this only checks that ``name`` is one."""
        if name not in self.adapters:
            raise ValueError(f"the policy actor holds adapters {list(self.adapters)}, not {name!r}")

    def version_of(self, adapter: str | None = None) -> int:
        return self._get(self.actor.version_of.remote(adapter), "to answer")

    def generate(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings,
                 adapter: str | None = None) -> list[Generation]:
        return self._get(self.actor.generate.remote([list(p) for p in prompts], settings, adapter), "to generate")

    def score(self, token_ids: Sequence[int], prompt_length: int, adapter: str | None = None) -> list[float]:
        return self._get(self.actor.score.remote(list(token_ids), prompt_length, adapter), "to score")

    def update_weights(self, weights: Mapping | Any, version: int, probe: Probe | None = None,
                       adapter: str | None = None) -> WeightSync:
        """``weights``: the tensors, or an object reference to them (passed on without a copy
        here); checked in the actor on ``probe``. Kept for ``restart``."""
        sync = self._get(self.actor.update_weights.remote(weights, version, probe, adapter), "to take new weights")
        self._synced[adapter] = (weights, version, probe)
        return sync

    def device_uuid(self) -> str | None:
        """The UUID of the policy's GPU (None on a CPU)."""
        return self._get(self.actor.device_uuid.remote(), "to answer")

    def receive_weights_ref(self, address, manifest, version: int, probes: dict):
        """Start the actor's receive over the weight channel (``Policy.receive_weights``); the
        reference to wait on with ``finish_receive`` (the sender is told to send meanwhile)."""
        return self.actor.receive_weights.remote(address, manifest, version, probes)

    def finish_receive(self, ref, weights: dict, version: int, probes: dict) -> dict[str, WeightSync]:
        """The syncs by group of a receive begun with ``receive_weights_ref``; ``weights`` (object
        references by adapter) and ``probes`` are kept for ``restart``, which restores from the
        object store."""
        from cudarl.rl.weight_channel import group_of

        syncs = self._get(ref, "to take new weights")
        for adapter, ref_of_weights in weights.items():
            self._synced[adapter] = (ref_of_weights, version, probes.get(group_of(adapter)))
        return syncs
