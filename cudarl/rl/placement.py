"""Where an RL run's workers go: the plan of CPU and GPU shares for the bench workers, the policy
actor and the update workers, checked against the cluster's nodes before anything waits on it.

Why: Ray places an actor that asks for a GPU share only on a single GPU with that much left, and
Ray Train waits without end for GPUs that an actor already holds. A run whose shares add up on
paper but cannot be packed onto the real GPUs (three shares of 0.6 on two GPUs) would hang at
start. The plan packs the shares in the order the run creates them (bench workers with the tester
pool, then the policy, then the update workers) the way Ray 2.60 assigns GPU shares on a node
(best fit: the GPU with the least left that still holds the share; seen with Ray's own actors
and placement groups, ``tests/integration/test_rl_placement_multinode.py``), and refuses a plan
that does not pack, with the numbers. ``lines`` prints it at start.

Covered: the plan from the config (one GPU shared by fractions; whole GPUs per worker on a
machine or cluster with several; two GPUs each shared by an update worker and the bench worker or
the policy), the packing check, two update workers on one GPU refused (NCCL would refuse them
after the start-up), a table. Not covered: CPUs beyond their sum
(Ray places CPU requests anywhere), nodes that join later (the pool's bench workers follow them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class PlacementError(ValueError):
    """The run's workers cannot all be placed on the cluster's GPUs."""


@dataclass(frozen=True)
class Slot:
    """One worker's share."""

    worker: str
    cpus: float
    gpus: float


@dataclass(frozen=True)
class PlacementPlan:
    """The run's workers in creation order, and the GPUs of each node they go on."""

    slots: tuple[Slot, ...]
    node_gpus: tuple[float, ...]
    assignment: tuple[str | None, ...] = ()  # per slot: "node n gpu g" (None: no GPU asked)

    @property
    def gpus_needed(self) -> float:
        return sum(slot.gpus for slot in self.slots)

    def lines(self) -> list[str]:
        """The plan as a small table (printed when a run starts)."""
        total = sum(self.node_gpus)
        head = (f"placement: {len(self.slots)} workers on {len(self.node_gpus)} node(s) with {total:g} GPU(s); "
                f"{self.gpus_needed:g} GPU(s) planned")
        rows = [f"  {slot.worker:<18} {slot.cpus:>4g} CPU {slot.gpus:>5g} GPU  {where or '-'}"
                for slot, where in zip(self.slots, self.assignment or (None,) * len(self.slots))]
        return [head, *rows]


def run_slots(config) -> list[Slot]:
    """The workers ``cudarl train`` creates, in order: the pool's bench workers (its minimum; they
    get no GPU on a cluster without one), the policy actor, the update workers."""
    train, pool = config.train, config.pool
    slots = [Slot(f"bench worker {i + 1}", 1.0, pool.gpus_per_bench_worker) for i in range(pool.min_bench_workers)]
    slots.append(Slot("policy", train.policy_cpus, train.policy_gpu))
    slots += [Slot(f"update worker {i + 1}", 1.0, train.gpus_per_rank) for i in range(train.ranks)]
    return slots


def plan_placement(slots: Sequence[Slot], node_gpus: Sequence[float]) -> PlacementPlan:
    """Pack ``slots`` in order onto the nodes' GPUs (best fit: a share goes on the GPU with the
    least left that still holds it, the first such; a whole GPU on the first GPU still whole);
    ``PlacementError`` if one does not fit."""
    if not any(node_gpus):  # no GPUs: bench workers run without one, and nothing else may ask
        slots = [Slot(s.worker, s.cpus, 0.0) if s.worker.startswith("bench") else s for s in slots]
    free = [[1.0] * int(count) for count in node_gpus]
    assignment: list[str | None] = []
    for slot in slots:
        if slot.gpus <= 0:
            assignment.append(None)
            continue
        fits = [(left, n, g) for n, gpus in enumerate(free) for g, left in enumerate(gpus)
                if left + 1e-9 >= slot.gpus]
        place = min(fits)[1:] if fits else None
        if place is None:
            planned = sum(s.gpus for s in slots)
            raise PlacementError(
                f"{slot.worker} needs {slot.gpus:g} of one GPU, and after the workers before it no GPU has that "
                f"much left ({planned:g} GPU(s) planned over {sum(node_gpus):g}; shares do not span "
                "GPUs): lower train.gpus_per_rank, train.policy_gpu_share or pool.gpus_per_bench_worker, "
                "or fewer workers")
        n, g = place
        free[n][g] -= slot.gpus
        assignment.append(f"node {n} gpu {g}")
    _refuse_update_workers_sharing_a_gpu(slots, assignment)
    return PlacementPlan(tuple(slots), tuple(node_gpus), tuple(assignment))


def _refuse_update_workers_sharing_a_gpu(slots: Sequence[Slot], assignment: Sequence[str | None]) -> None:
    """NCCL refuses two ranks of one group on one GPU ("duplicate GPU"), after minutes of start-up."""
    seen: dict[str, str] = {}
    for slot, where in zip(slots, assignment):
        if where is None or not slot.worker.startswith("update"):
            continue
        if where in seen:
            raise PlacementError(
                f"{seen[where]} and {slot.worker} would share {where}, and NCCL refuses two ranks on one GPU: "
                "give each update worker more than half a GPU (train.gpus_per_rank), or one rank "
                "(the bench workers and the policy, created first, may take the rest of each GPU: "
                "on 2 GPUs pool.gpus_per_bench_worker 0.5, train.policy_gpu_share 0.6, train.gpus_per_rank 0.4 "
                "puts one update worker on each GPU)")
        seen[where] = slot.worker


def cluster_node_gpus() -> list[float]:
    """The GPUs of every live node of the connected Ray cluster."""
    import ray

    return [node["Resources"].get("GPU", 0.0) for node in ray.nodes() if node.get("Alive")]
