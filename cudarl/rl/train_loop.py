"""The update workers' loop under Ray Train: take the step's shard from this rank's inbox, update,
and (rank 0) put the new weights in the object store and their references and the probe's
log-probs in the outbox; ``None`` ends it.

Why queues and one long ``fit``: Ray Train runs a function to its end, and an RL step's batch
exists only after the rollouts, so the workers stay up for the whole run and wait for work. The
records crossing the queues are typed (``UpdateJob``, ``UpdateResult``).

With a weight channel (``weight_channel``), every rank keeps each step's exported weights, and the
one the driver sends a ``SendJob`` (rank 0, or the first off the policy's GPU: their GPUs are
gathered at start) broadcasts them to the policy actor, which the driver has
asked to receive at the same moment (so neither end waits in a collective while the other is
busy generating); it answers ``("sent", seconds)``.

Covered: the loop. Not covered: starting it (``group``), the update (``update``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cudarl.rl.batch import TrainSample
from cudarl.rl.update import UpdaterSpec
from cudarl.rl.weight_channel import ChannelAddress, Manifest


@dataclass(frozen=True)
class UpdateJob:
    """One rank's share of one step."""

    step: int
    samples: tuple[TrainSample, ...]
    plan: dict  # adapter name (None: the whole model) -> StepPlan, the same on every rank
    probe: tuple[tuple[int, ...], int] | None = None  # (token ids, prompt length) to score after the step
    save_to: str | None = None  # a folder for the trainer's state after the step (torch distributed checkpoint)


@dataclass(frozen=True)
class ProbeJob:
    """Score a probe on the current weights without a step (every rank gets one: under FSDP2 the
    scoring is a collective); rank 0 answers ``("probe", {adapter: log-probs})``. How the driver
    checks weights the engine took from elsewhere (the warm start's adapters)."""

    probe: tuple[tuple[int, ...], int]


@dataclass(frozen=True)
class SendJob:
    """Rank 0 only: broadcast the last step's weights over the channel at ``channel`` (opened on
    first use; a new key, after the policy restarted, opens a new one)."""

    channel: ChannelAddress


@dataclass(frozen=True)
class UpdateResult:
    """Rank 0's report of a step: what to push to the engines, and how to check it."""

    step: int
    version: int
    weights: dict  # adapter name (None: the whole model) -> ObjectRef of its full CPU tensors (``fetch``)
    probe_logprobs: dict = field(default_factory=dict)  # adapter name -> log-probs of the probe's continuation
    metrics: dict = field(default_factory=dict)
    seconds: float = 0.0  # the whole job on rank 0: step, weights out, probe, checkpoint
    step_seconds: float = 0.0  # the optimizer step alone (forward, backward, clip, AdamW)
    manifest: Manifest = ()  # the weights as a weight channel sends them (what the receiver allocates)

    def fetch(self, name: str | None) -> dict:
        """The tensors of ``name`` (from the object store: a policy actor takes the reference
        itself, so the driver never holds full weights unless it checkpoints them)."""
        import ray

        return ray.get(self.weights[name])


def train_loop_per_worker(config: dict) -> None:
    """Ray Train's worker function; ``config``: ``spec`` (UpdaterSpec), ``inboxes`` (one queue per
    rank), ``outbox``."""
    import ray
    import ray.train
    import torch

    from cudarl.rl.update import PolicyUpdater
    from cudarl.rl.weight_channel import WeightChannel, device_uuid, group_of, manifest_of

    context = ray.train.get_context()
    rank = context.get_world_rank()
    spec: UpdaterSpec = config["spec"]
    device = "cuda" if torch.cuda.is_available() and config.get("use_gpu") else "cpu"
    if device == "cuda":
        torch.cuda.set_device(context.get_local_rank())
    updater = PolicyUpdater(spec, device=device)
    if config.get("resume_from"):
        updater.load(config["resume_from"])
    inbox, outbox = config["inboxes"][rank], config["outbox"]
    exported = tuple(spec.adapters) or (None,)  # what each step exports and each probe scores
    channels: dict[str, WeightChannel] = {}  # by key: the current pairing (the sending rank)
    last: dict = {}  # the last step's weights, by channel group name, until sent
    gpus = _every_rank(device_uuid() if device == "cuda" else None)  # the driver picks the sender by them
    if rank == 0:
        outbox.put(("ready", (updater.version, gpus)))
    while True:
        job: UpdateJob | ProbeJob | SendJob | None = inbox.get()
        if job is None:
            for channel in channels.values():
                channel.close()
            return
        if isinstance(job, SendJob):  # a failed send is reported, not raised: the driver then stops the run
            started = time.perf_counter()
            try:
                if job.channel.key not in channels:
                    for old in channels.values():
                        old.close()
                    channels = {job.channel.key: WeightChannel(job.channel, 0, device)}
                channels[job.channel.key].send(last)
                outbox.put(("sent", time.perf_counter() - started))
            except Exception as exc:  # noqa: BLE001 - reported to the driver with its reason
                outbox.put(("send_failed", f"{type(exc).__name__}: {exc}"))
            continue
        if isinstance(job, ProbeJob):
            probes = {name: updater.probe_logprobs(*job.probe, adapter=name) for name in exported}
            if rank == 0:
                outbox.put(("probe", probes))
            continue
        started = time.perf_counter()
        metrics = updater.step(job.samples, job.plan)
        stepped = time.perf_counter() - started
        weights = {name: updater.weights(name) for name in exported}  # a collective: every rank
        probes = {name: updater.probe_logprobs(*job.probe, adapter=name) for name in exported} if job.probe else {}
        if job.save_to:
            updater.save(job.save_to)
        last = {group_of(name): tensors for name, tensors in weights.items()}  # any rank may be the sender
        if rank == 0:  # the weights by reference: the queue carries only the small record
            weights = {name: ray.put(tensors) for name, tensors in weights.items()}
            outbox.put(("result", UpdateResult(step=job.step, version=updater.version, weights=weights,
                                               probe_logprobs=probes, metrics=metrics,
                                               seconds=time.perf_counter() - started, step_seconds=stepped,
                                               manifest=manifest_of(last))))


def _every_rank(value):
    """``value`` from every rank, in rank order (a collective; one rank without a process group)."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return (value,)
    values: list = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return tuple(values)
