"""Each step's weights into the rollout engine, checked on the step's probe: through the object
store, or over a weight channel (``weight_channel``) between the update workers' rank 0 and the
policy actor, chosen once per run (``train.weight_sync``).

Why a module of its own: the choice depends on where Ray put both ends (only they can say which
GPU they hold), and the channel's sync is a three-party handshake (the driver starts the policy's
receive, then tells rank 0 to send, then collects both answers), which the driver's step loop
should not spell out.

Covered: the choice (refused with the reason when "collective" cannot work), both paths. Not
covered: the warm start and a resume (their weights come from folders through the object store).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from cudarl.rl.weight_channel import ChannelAddress, adapter_of, group_of, open_store
from cudarl.rollout.engine import Probe, WeightSync, WeightSyncError


@dataclass
class ChannelPlan:
    """The run's channel: its store (kept alive here), address and backend."""

    store: object
    host: str
    port: int
    backend: str
    timeout_s: float

    def address(self, key: str) -> ChannelAddress:
        return ChannelAddress(self.host, self.port, key, self.backend, self.timeout_s)


def choose_channel(setting: str, trainer_gpu: str | None, policy_gpu: str | None,
                   timeout_s: float = 600.0) -> ChannelPlan | None:
    """The channel for ``train.weight_sync`` = ``setting`` given both ends' devices (a GPU's
    UUID, None on a CPU); None: the object store. ``ValueError`` for a "collective" that cannot work."""
    if setting == "object_store":
        return None
    both_gpus = trainer_gpu is not None and policy_gpu is not None
    both_cpus = trainer_gpu is None and policy_gpu is None
    same_gpu = both_gpus and trainer_gpu == policy_gpu
    if setting == "auto" and (not both_gpus or same_gpu):
        return None
    if setting == "collective" and same_gpu:
        raise ValueError(f"train.weight_sync = 'collective': the update workers' rank 0 and the policy share GPU "
                         f"{trainer_gpu}, and NCCL refuses two members on one GPU; give the policy a GPU of its own "
                         "(policy_gpu_share and gpus_per_rank of 1 on a machine with enough GPUs) or use 'auto'")
    if setting == "collective" and not (both_gpus or both_cpus):
        raise ValueError("train.weight_sync = 'collective' needs the update workers and the policy both on GPUs "
                         "(NCCL) or both on CPUs (gloo); one of them has a GPU and the other not: use 'auto'")
    store, host, port = open_store(timeout_s)
    return ChannelPlan(store, host, port, "nccl" if both_gpus else "gloo", timeout_s)


def describe(plan: ChannelPlan | None, trainer_gpu: str | None, policy_gpu: str | None) -> str:
    if plan is None:
        return "weights sync: through the object store"
    where = f" (GPU {trainer_gpu} to GPU {policy_gpu})" if plan.backend == "nccl" else ""
    return f"weights sync: over a {plan.backend} channel{where}"


def push_weights(engine, group, result, probes: dict, plan: ChannelPlan | None) -> dict[str, WeightSync]:
    """``result``'s weights into ``engine`` (a ``PolicyClient``), each adapter (or the model)
    checked on ``probes[adapter]``; the syncs by adapter name ("None" for the model)."""
    if plan is None:
        return {str(adapter): engine.update_weights(weights, result.version, probe=probes[adapter], adapter=adapter)
                for adapter, weights in result.weights.items()}  # object references: the actor fetches them
    import time

    import ray

    by_group: dict[str, Probe] = {group_of(adapter): probe for adapter, probe in probes.items()}
    address = plan.address(engine.name)
    receiving = engine.receive_weights_ref(address, result.manifest, result.version, by_group)
    group.start_send(address)
    syncs, sent, deadline = None, None, time.monotonic() + plan.timeout_s
    while syncs is None or sent is None:  # both ends watched: either one's failure ends the wait at once
        if syncs is None and ray.wait([receiving], timeout=0.3)[0]:
            syncs = engine.finish_receive(receiving, result.weights, result.version, by_group)
        if sent is None:
            sent = group.poll_send()
        if time.monotonic() > deadline:
            raise WeightSyncError(f"the weights over the {plan.backend} channel took more than {plan.timeout_s:g} s "
                                  f"(received: {syncs is not None}, sent: {sent is not None})")
    if sent > 60:
        print(f"the weight channel took {sent:.0f} s to send", file=sys.stderr, flush=True)
    return {str(adapter_of(name)): sync for name, sync in syncs.items()}
