"""The driver's handle on the update workers: a Ray Train ``TorchTrainer`` running
``train_loop_per_worker`` on ``ranks`` workers for the whole run, fed through queues.

``fit`` blocks until the workers end, so it runs in a thread here; every wait on the workers
also watches that thread, so a worker that dies surfaces as ``UpdateWorkersError`` with Ray's
reason, never as a hang. CPU workers use gloo; GPU workers NCCL (Ray Train picks the backend).

Covered: start (refused at once, with the numbers, when the cluster's free resources cannot hold
the workers: Ray Train would otherwise wait forever), one update, stop. Not covered: checkpoints
(the driver), placement (the caller sizes ``cpus_per_rank`` and ``gpus_per_rank`` so that the
policies and bench workers still fit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from cudarl import _compat
from cudarl.rl.batch import TrainSample, batch_counts, deal
from cudarl.rl.train_loop import ProbeJob, SendJob, UpdateJob, UpdateResult, train_loop_per_worker
from cudarl.rl.update import StepPlan, UpdaterSpec
from cudarl.rl.weight_channel import ChannelAddress


def plan_step(samples: Sequence[TrainSample], ranks: int, micro_batch: int,
              by_adapter: bool) -> tuple[list[list[TrainSample]], dict]:
    """Each adapter's samples dealt over the ranks on their own, and its ``StepPlan``: its token
    count over the step and the micro-batches every rank runs for it (the most any rank needs)."""
    import math

    groups: dict[str | None, list[TrainSample]] = {}
    for sample in samples:
        groups.setdefault(sample.adapter if by_adapter else None, []).append(sample)
    if by_adapter and None in groups:
        raise ValueError("samples without an adapter, but the update workers train one adapter per role")
    shards: list[list[TrainSample]] = [[] for _ in range(ranks)]
    plan = {}
    for adapter, rows in groups.items():
        parts = deal(rows, ranks)
        for shard, part in zip(shards, parts):
            shard.extend(part)
        plan[adapter] = StepPlan(counts=batch_counts(rows, ranks),
                                 micro_batches=max(math.ceil(len(part) / micro_batch) for part in parts))
    return shards, plan


class UpdateWorkersError(RuntimeError):
    """The update workers stopped or did not answer in time."""


def check_fits(ranks: int, resources: dict[str, float], free: dict[str, float], what: str = "the update workers need",
               error: type[Exception] = UpdateWorkersError,
               advice: str = "lower train.ranks or train.gpus_per_rank, or give the cluster more") -> None:
    """Refuse, with the numbers, workers the cluster's free resources cannot hold: Ray Train (or
    an actor waiting to be placed) would wait for them forever (an actor that holds the GPU they
    need never lets it go)."""
    short = {name: (ranks * amount, free.get(name, 0.0)) for name, amount in resources.items()
             if amount and ranks * amount > free.get(name, 0.0) + 1e-9}
    if short:
        needs = ", ".join(f"{need:g} {name} ({ranks} x {resources[name]:g})" for name, (need, _) in short.items())
        has = ", ".join(f"{have:g} {name}" for name, (_, have) in short.items())
        raise error(f"{what} {needs} but the cluster has {has} free (the tester pool and other actors "
                    f"hold the rest): {advice}")


def wait_until_fits(ranks: int, resources: dict[str, float], timeout_s: float = 60.0, **refusal) -> None:
    """``check_fits`` once the cluster has the room, waiting up to ``timeout_s`` for it: the
    workers of a run that just ended (or a killed actor) give their shares back only once their
    processes are gone, seconds later; after the wait, refused with the numbers (``refusal``:
    ``check_fits``'s wording). More than the whole cluster holds is refused at once."""
    import ray

    check_fits(ranks, resources, ray.cluster_resources(), **refusal)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check_fits(ranks, resources, ray.available_resources(), **refusal)
        except refusal.get("error", UpdateWorkersError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class UpdateGroup:
    def __init__(self, spec: UpdaterSpec, ranks: int = 1, cpus_per_rank: float = 1.0, gpus_per_rank: float = 0.0,
                 start_timeout_s: float = 600.0, storage_path: str | None = None,
                 resume_from: str | None = None) -> None:
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer
        from ray.util.queue import Queue

        if ranks < 1:
            raise ValueError(f"ranks must be at least 1, got {ranks}")
        self.ranks, self.spec = ranks, spec
        resources = {"CPU": cpus_per_rank, **({"GPU": gpus_per_rank} if gpus_per_rank else {})}
        wait_until_fits(ranks, resources)
        _compat.start_train_autoscaling_coordinator()  # answering before the controller asks
        self.inboxes = [Queue(actor_options={"num_cpus": 0}) for _ in range(ranks)]
        self.outbox = Queue(actor_options={"num_cpus": 0})
        self._trainer = TorchTrainer(
            train_loop_per_worker,
            train_loop_config={"spec": spec, "inboxes": self.inboxes, "outbox": self.outbox,
                               "use_gpu": gpus_per_rank > 0, "resume_from": resume_from},
            scaling_config=ScalingConfig(num_workers=ranks, use_gpu=gpus_per_rank > 0,
                                         resources_per_worker=resources),
            run_config=RunConfig(name=f"cudarl-update-{int(time.time())}", storage_path=storage_path))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._fit, name="cudarl-update-workers", daemon=True)
        self._thread.start()
        kind, (self.version, self.device_uuids) = self._receive(start_timeout_s, "to start")
        assert kind == "ready"

    @property
    def device_uuid(self) -> str | None:
        """Rank 0's GPU (None on a CPU)."""
        return self.device_uuids[0]

    def _fit(self) -> None:
        try:
            self._trainer.fit()
        except BaseException as exc:  # noqa: BLE001 - surfaced to the caller by _receive
            self._error = exc

    def _raise_if_stopped(self, when: str) -> None:
        """``UpdateWorkersError`` with Ray's reason once the workers' ``fit`` has ended."""
        if not self._thread.is_alive():
            reason = f"{type(self._error).__name__}: {self._error}" if self._error else "they exited"
            raise UpdateWorkersError(f"the update workers stopped {when}: {reason}") from self._error

    def _receive(self, timeout_s: float, doing: str):
        from ray.util.queue import Empty

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                return self.outbox.get(timeout=1.0)
            except Empty:
                self._raise_if_stopped(f"before {doing}")
        raise UpdateWorkersError(f"the update workers took more than {timeout_s:g} s {doing}")

    def update(self, step: int, samples: Sequence[TrainSample], probe: tuple[tuple[int, ...], int] | None = None,
               save_to: str | None = None, timeout_s: float = 3600.0) -> UpdateResult:
        """One step over ``samples`` (dealt over the ranks); the new weights and probe log-probs.
        ``save_to``: the trainer's state is written there after the step (shared storage)."""
        shards, plan = plan_step(samples, self.ranks, self.spec.micro_batch, bool(self.spec.adapters))
        for inbox, part in zip(self.inboxes, shards):
            inbox.put(UpdateJob(step=step, samples=tuple(part), plan=plan, probe=probe, save_to=save_to))
        kind, result = self._receive(timeout_s, f"finishing step {step}")
        assert kind == "result"
        self.version = result.version
        return result

    def probe(self, token_ids: Sequence[int], prompt_length: int, timeout_s: float = 600.0) -> dict:
        """The trainer's log-probs of ``token_ids[prompt_length:]`` per adapter (None: the whole
        model) on its current weights, no step taken."""
        for inbox in self.inboxes:
            inbox.put(ProbeJob(probe=(tuple(token_ids), prompt_length)))
        kind, probes = self._receive(timeout_s, "scoring a probe")
        assert kind == "probe"
        return probes

    def start_send(self, channel: ChannelAddress, rank: int = 0) -> None:
        """Update worker ``rank`` broadcasts the last step's weights over ``channel`` (any rank
        holds an adapter's; a full model's only rank 0); the receiver must join now
        (``poll_send`` then collects the sender's answer)."""
        self.inboxes[rank].put(SendJob(channel=channel))

    def poll_send(self) -> float | None:
        """The sender's seconds for the send it was asked for, or None while it is still sending; its
        failure (or the workers' end) as ``UpdateWorkersError``."""
        from ray.util.queue import Empty

        try:
            kind, answer = self.outbox.get(timeout=0.2)
        except Empty:
            self._raise_if_stopped("while sending the weights")
            return None
        if kind == "send_failed":
            raise UpdateWorkersError(f"the update worker sending the weights could not: {answer}")
        assert kind == "sent", kind
        return answer

    def stop(self, timeout_s: float = 120.0) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        self._thread.join(timeout_s)


def update_and_sync(group: UpdateGroup, engine, step: int, samples: Sequence[TrainSample], probe_ids: tuple[int, ...],
                    prompt_length: int, adapter: str, tolerance: float):
    """One update of a single-adapter loop, then its weights into ``engine``, checked on the probe
    (``WeightSyncError`` if the engine does not reproduce the trainer's log-probs); the update's
    result and the sync."""
    from cudarl.rollout.engine import Probe

    result = group.update(step, samples, probe=(probe_ids, prompt_length))
    probe = Probe(probe_ids, prompt_length, tuple(result.probe_logprobs[adapter]), tolerance)
    sync = engine.update_weights(result.fetch(adapter), result.version, adapter=adapter, probe=probe)
    return result, sync
