"""The RL run's placement plan on a real multi-node Ray cluster on this machine
(``ray.cluster_utils.Cluster``: one raylet per node; the GPUs are Ray resources only).

Covered: on one node with two GPUs shared (the 2-GPU layout: the bench worker and the policy
apart, one update worker beside each, the update workers in a placement group as Ray Train makes
it), the GPUs Ray gives every worker are the plan's, and the weight channel's sender is the
update worker off the policy's GPU. Across nodes: the plan read from the live cluster's nodes;
one actor per planned slot, created in the plan's order with the plan's CPU and GPU shares, all
placed (none left waiting), each whole-GPU worker on its own GPU, two per GPU node; one more
whole-GPU worker refused by the plan, and the same worker created anyway left pending by Ray
(the hang the plan exists to prevent). Not
covered: the workers themselves (the update workers need real GPUs for NCCL, and the policy a
CUDA engine: the slots are stand-ins with the same resource requests), speed.
"""

from __future__ import annotations

import pytest
import ray  # a dependency: a broken install must fail, not skip
from ray import cluster_utils

from cudarl.config import CudarlConfig
from cudarl.rl.placement import PlacementError, cluster_node_gpus, plan_placement, run_slots
from cudarl.rl.weight_sync import choose_channel


@ray.remote
class _SlotStandIn:
    def where(self) -> tuple[str, tuple]:
        return ray.get_runtime_context().get_node_id(), tuple(ray.get_gpu_ids())


def _config(ranks: int) -> CudarlConfig:
    return CudarlConfig.model_validate({
        "train": {"ranks": ranks, "gpus_per_rank": 1.0, "policy_gpu_share": 1.0},
        "pool": {"min_bench_workers": 1, "gpus_per_bench_worker": 1.0}})


@pytest.mark.slow
def test_two_shared_gpus_get_one_update_worker_each_as_planned_and_the_sender_is_off_the_policys_gpu(own_ray):
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    config = CudarlConfig.model_validate({
        "train": {"ranks": 2, "gpus_per_rank": 0.4, "policy_gpu_share": 0.6},
        "pool": {"min_bench_workers": 1, "gpus_per_bench_worker": 0.5}})
    try:
        ray.init(address="local", num_cpus=6, num_gpus=2, include_dashboard=False, logging_level="ERROR")
        plan = plan_placement(run_slots(config), cluster_node_gpus())
        bench, policy, *ranks = plan.slots
        actors = []
        for slot in (bench, policy):  # one after the other, each placed before the next asks (as the run does)
            actors.append(_SlotStandIn.options(num_cpus=slot.cpus, num_gpus=slot.gpus).remote())
            ray.get(actors[-1].where.remote(), timeout=120)
        group = placement_group([{"CPU": slot.cpus, "GPU": slot.gpus} for slot in ranks], strategy="PACK")
        ray.get(group.ready(), timeout=60)
        actors += [_SlotStandIn.options(num_cpus=slot.cpus, num_gpus=slot.gpus, scheduling_strategy=(
            PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index))).remote()
            for index, slot in enumerate(ranks)]
        gpus = [gpu for _, (gpu,) in ray.get([actor.where.remote() for actor in actors], timeout=120)]
    finally:
        ray.shutdown()
    where = [f"node 0 gpu {gpu}" for gpu in gpus]
    assert plan.assignment[:2] == tuple(where[:2])  # the bench worker and the policy where the plan said
    # the update workers on the plan's GPUs, one each (which bundle gets which GPU varies from run to
    # run: the sender is chosen from the GPUs the workers report, not from the plan)
    assert sorted(plan.assignment[2:]) == sorted(where[2:]) and gpus[0] != gpus[1] and gpus[2] != gpus[3]
    sender = choose_channel("auto", [f"uuid-{gpu}" for gpu in gpus[2:]], f"uuid-{gpus[1]}").sender
    assert gpus[2 + sender] != gpus[1]


@pytest.mark.slow
def test_the_plan_places_bench_policy_and_update_workers_across_gpu_nodes(own_ray):
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    gpu_nodes = [cluster.add_node(num_cpus=2, num_gpus=2) for _ in range(2)]
    try:
        ray.init(address=cluster.address, logging_level="ERROR")
        cluster.wait_for_nodes()
        node_gpus = cluster_node_gpus()
        plan = plan_placement(run_slots(_config(ranks=2)), node_gpus)
        stand_ins = [_SlotStandIn.options(num_cpus=slot.cpus, num_gpus=slot.gpus).remote() for slot in plan.slots]
        placed = ray.get([worker.where.remote() for worker in stand_ins], timeout=120)
        with pytest.raises(PlacementError, match="update worker 3 needs 1 of one GPU"):
            plan_placement(run_slots(_config(ranks=3)), node_gpus)
        extra = _SlotStandIn.options(num_cpus=0, num_gpus=1).remote()
        waiting, _ = ray.wait([extra.where.remote()], timeout=5)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert sorted(node_gpus) == [0.0, 2.0, 2.0]
    assert [slot.worker for slot in plan.slots] == ["bench worker 1", "policy", "update worker 1", "update worker 2"]
    gpu_node_ids = {node.node_id for node in gpu_nodes}
    assert all(node in gpu_node_ids and len(gpus) == 1 for node, gpus in placed)
    assert len(set(placed)) == 4  # four GPUs, one worker each
    assert sorted(sum(node == n for node, _ in placed) for n in gpu_node_ids) == [2, 2]
    assert waiting == []  # created against the plan, a fifth whole-GPU worker waits for ever
