"""Each step's weights into the rollout engine, checked on the step's probe: through the object
store, or over a weight channel (``weight_channel``) between one update worker (rank 0, or the
first rank on another GPU than the policy's) and the policy actor, chosen once per run (``train.weight_sync``).

Why a module of its own: the choice depends on where Ray put both ends (only they can say which
GPU they hold), and the channel's sync is a three-party handshake (the driver starts the policy's
receive, then tells the sending update worker to send, then collects both answers), which the driver's step loop
should not spell out.

Covered: the choice (refused with the reason when "collective" cannot work), both paths. Not
covered: the warm start and a resume (their weights come from folders through the object store).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from cudarl.rl.weight_channel import ChannelAddress, adapter_of, group_of, open_store
from cudarl.rollout.engine import Probe, WeightSync, WeightSyncError


@dataclass
class ChannelPlan:
    """The run's channel: its store (kept alive here), address, backend and the update worker
    that sends (the first whose GPU is not the policy's: NCCL refuses two members on one GPU)."""

    store: object
    host: str
    port: int
    backend: str
    timeout_s: float
    sender: int = 0

    def address(self, key: str) -> ChannelAddress:
        return ChannelAddress(self.host, self.port, key, self.backend, self.timeout_s)


def choose_channel(setting: str, trainer_gpus: Sequence[str | None], policy_gpu: str | None,
                   any_rank: bool = True, timeout_s: float = 600.0) -> ChannelPlan | None:
    """The channel for ``train.weight_sync`` = ``setting`` given both ends' devices (each update
    worker's GPU UUID by rank, the policy's; None on a CPU); None: the object store.
    ``any_rank``: every rank holds the exported weights (adapters; a full model's state is gathered
    on rank 0 alone), so any rank off the policy's GPU may send. ``ValueError`` for a
    "collective" that cannot work."""
    if setting == "object_store":
        return None
    candidates = list(trainer_gpus) if any_rank else list(trainer_gpus[:1])
    both_cpus = all(gpu is None for gpu in candidates) and policy_gpu is None
    sender = next((rank for rank, gpu in enumerate(candidates)
                   if gpu is not None and policy_gpu is not None and gpu != policy_gpu), None)
    if setting == "auto" and sender is None:
        return None
    if setting == "collective" and sender is None and not both_cpus:
        on_gpus = policy_gpu is not None and all(gpu is not None for gpu in candidates)
        if on_gpus:
            raise ValueError(f"train.weight_sync = 'collective': every update worker that could send shares GPU "
                             f"{policy_gpu} with the policy, and NCCL refuses two members on one GPU; give the "
                             "policy a GPU share of its own (policy_gpu_share, gpus_per_rank) or use 'auto'")
        raise ValueError("train.weight_sync = 'collective' needs the update workers and the policy both on GPUs "
                         "(NCCL) or both on CPUs (gloo); one of them has a GPU and the other not: use 'auto'")
    store, host, port = open_store(timeout_s)
    return ChannelPlan(store, host, port, "gloo" if sender is None else "nccl", timeout_s, sender or 0)


def describe(plan: ChannelPlan | None, trainer_gpus: Sequence[str | None], policy_gpu: str | None) -> str:
    if plan is None:
        return "weights sync: through the object store"
    where = (f" (update worker {plan.sender} on GPU {trainer_gpus[plan.sender]} to the policy on GPU {policy_gpu})"
             if plan.backend == "nccl" else "")
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
    group.start_send(address, plan.sender)
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
